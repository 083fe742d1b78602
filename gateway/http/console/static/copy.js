// The Keys page's copy button: the one script of the console, served from
// the console itself (CSP script-src 'self'), so no inline script is needed.
document.addEventListener("click", function (e) {
  var b = e.target.closest("button[data-copy]");
  if (!b) return;
  var field = document.getElementById(b.getAttribute("data-copy"));
  if (!field) return;
  field.select();
  navigator.clipboard.writeText(field.value).then(function () { b.textContent = "Copied"; },
    function () { document.execCommand("copy"); b.textContent = "Copied"; });
});
