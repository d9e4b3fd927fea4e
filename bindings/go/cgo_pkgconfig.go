//go:build llmrt_pkgconfig

package llmrt

// With -tags llmrt_pkgconfig the installed library is found by pkg-config.

/*
#cgo pkg-config: llmrt
*/
import "C"
