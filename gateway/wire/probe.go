package wire

import (
	"github.com/modelgate/modelgate/gateway/media"
	"github.com/modelgate/modelgate/gateway/platform/blob"
	"github.com/modelgate/modelgate/gateway/platform/netguard"
)

// imageProbe checks remote reference images of the multi-image family: the
// gateway's own signed file links (uploads) in process, every other URL over
// the network behind the private-network guard. nil when turned off.
func imageProbe(blobs *blob.Store, guard *netguard.Guard, off bool) media.ImageProbe {
	if off {
		return nil
	}
	p := &media.HTTPImageProbe{UserAgent: "modelgate-image-probe", Guard: guard}
	if blobs != nil && blobs.Local() {
		p.Local, p.LocalPrefix = blobs.Handler(), blobs.LocalPrefix
	}
	return p.Probe
}
