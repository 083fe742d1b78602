package media_test

import (
	"fmt"

	"github.com/modelgate/modelgate/api/v1alpha1"
	"github.com/modelgate/modelgate/gateway/media"
)

func ExampleValidate() {
	body := []byte(`{"model":"any-configured-name","prompt":"a lighthouse","n":3}`)
	n, verr := media.Validate(v1alpha1.ProfileMultiImage, body, media.Options{})
	if verr != nil {
		fmt.Println(verr.Status, verr.Type, verr.Message)
		return
	}
	raw, _ := n.RequestJSON()
	fmt.Println(n.N, n.Resolution, n.Width, n.Height)
	fmt.Println(string(raw))

	_, verr = media.Validate(v1alpha1.ProfileMultiImage, []byte(`{"prompt":"x","n":"2"}`), media.Options{})
	fmt.Println(verr.Status, verr.Type, verr.Param, verr.Message)
	// Output:
	// 3 2K 2048 2048
	// {"metadata":{"optimize_prompt_options":{"mode":"standard"},"resolution":"2K","sequential_image_generation":"auto","sequential_image_generation_options":{"max_images":3},"watermark":true},"model":"any-configured-name","n":3,"prompt":"a lighthouse","size":"1:1"}
	// 400 invalid_request n n must be a JSON number, not a string
}
