package main

import (
	"flag"
	"io"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/modelgate/modelgate/gateway/housekeeping"
)

// The retention flags take days or Go durations, default to the documented
// retentions and refuse what is not a retention.
func TestRetentionFlags(t *testing.T) {
	parse := func(args ...string) (housekeeping.Keeper, error) {
		var k housekeeping.Keeper
		fs := flag.NewFlagSet("manager", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		registerHousekeeping(fs, &k)
		return k, fs.Parse(args)
	}
	g := NewWithT(t)
	k, err := parse()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k.Retention).To(Equal(housekeeping.DefaultRetention()))
	g.Expect(k.Retention.Usage).To(Equal(400 * 24 * time.Hour))
	g.Expect(k.Retention.Responses).To(Equal(30 * 24 * time.Hour))

	k, err = parse("--retention-usage=90d", "--retention-responses=12h", "--retention-reservations=0", "--retention-tasks=1d")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(k.Retention.Usage).To(Equal(90 * 24 * time.Hour))
	g.Expect(k.Retention.Responses).To(Equal(12 * time.Hour))
	g.Expect(k.Retention.Reservations).To(BeZero(), "0 keeps them forever")
	g.Expect(k.Retention.Tasks).To(Equal(24 * time.Hour))

	for _, bad := range []string{"-1d", "1.5d", "-3h", "soon"} {
		_, err = parse("--retention-usage=" + bad)
		g.Expect(err).To(HaveOccurred(), bad)
	}
	d := days(400 * 24 * time.Hour)
	g.Expect(d.String()).To(Equal("400d"))
	d = days(90 * time.Minute)
	g.Expect(d.String()).To(Equal("1h30m0s"))
}
