// Package check holds the tests of mm2go's deployment files: the Dockerfile, the Knative and
// Kubernetes manifests, the Azure Resource Manager template, and the image built by
// cmd/mkimage. Everything is decoded strictly into the platforms' own Go API types, so a
// misspelt or misplaced field fails `cd deploy && go test ./...`.
package check
