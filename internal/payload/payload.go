// Package payload is how fleetlift's workflows, activities and clients
// encode what they hand Temporal: JSON as the SDK's default converter
// makes it, and a large payload compressed with zlib.
//
// Temporal refuses a payload over 2 MiB (its blob size limit), and a
// campaign carries its repositories and what happened in each from one
// run to the next (continue-as-new): uncompressed, a campaign of 10,000
// repositories crossed that limit and stuck for good. That JSON repeats
// itself (URLs, branch names, phases) and compresses about tenfold.
// Payloads under MinCompressed, nearly all of them, are left as they are:
// compressing them would cost CPU on every step for nothing.
//
// Every client fleetlift makes uses Converter, and every payload it
// decodes by hand (memos, heartbeat details, search attributes, history
// events) goes through it too. A payload written without the codec (an
// older run, a search attribute) reads as before: the codec leaves what
// it did not encode alone. The temporal CLI and the Web UI show
// compressed payloads as binary/zlib.
package payload

import (
	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
)

// MinCompressed is the smallest payload compressed.
const MinCompressed = 64 << 10

// Converter encodes and decodes fleetlift's payloads.
var Converter = converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), largeOnly{zlib})

var zlib = converter.NewZlibCodec(converter.ZlibCodecOptions{})

// largeOnly compresses payloads of MinCompressed bytes or more, and
// decodes whatever zlib encoded.
type largeOnly struct{ converter.PayloadCodec }

func (c largeOnly) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if len(p.GetData()) < MinCompressed {
			out[i] = p
			continue
		}
		enc, err := c.PayloadCodec.Encode([]*commonpb.Payload{p})
		if err != nil {
			return nil, err
		}
		out[i] = enc[0]
	}
	return out, nil
}
