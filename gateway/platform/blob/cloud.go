package blob

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"gocloud.dev/blob"

	// Cloud drivers, chosen by the store URL's scheme.
	_ "gocloud.dev/blob/azureblob"
	_ "gocloud.dev/blob/gcsblob"
	_ "gocloud.dev/blob/s3blob"
)

// OpenURL opens a cloud bucket by URL, as gocloud.dev understands it:
//
//	s3://bucket?region=eu-west-1                       (AWS S3)
//	s3://bucket?endpoint=https://minio:9000&use_path_style=true&region=us-east-1  (S3-compatible)
//	gs://bucket                                        (Google Cloud Storage)
//	azblob://container                                 (Azure Blob Storage)
//
// Credentials come from the platform's usual sources (environment, workload
// identity, instance roles). Object URLs are the bucket's own signed URLs,
// or publicBase + "/" + key when publicBase is set (a public bucket or a CDN
// in front of it).
func OpenURL(ctx context.Context, storeURL, publicBase string) (*Store, error) {
	u, err := url.Parse(storeURL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("blob: %q is not a store URL (s3://, gs://, azblob://)", redactURL(storeURL))
	}
	b, err := blob.OpenBucket(ctx, storeURL)
	if err != nil {
		// gocloud's errors quote the URL, whose query may hold secrets.
		msg := strings.ReplaceAll(err.Error(), storeURL, redactURL(storeURL))
		return nil, fmt.Errorf("blob: open %s: %s", redactURL(storeURL), msg)
	}
	return &Store{bucket: b, publicBase: strings.TrimRight(publicBase, "/")}, nil
}

// redactURL drops the query (it may carry credentials) and user info.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparseable>"
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}
