//go:build !llmrt_pkgconfig

package llmrt

// Default: the header and library of the in-repo build (../../build/lib,
// then ../../build-bind/lib). Point elsewhere with
//   CGO_CFLAGS=-I$DIR/include CGO_LDFLAGS="-L$LLMRT_LIB_DIR -Wl,-rpath,$LLMRT_LIB_DIR"
// (flags from the environment come first), or build with -tags llmrt_pkgconfig.

/*
#cgo CFLAGS: -I${SRCDIR}/../../include
#cgo LDFLAGS: -L${SRCDIR}/../../build/lib -L${SRCDIR}/../../build-bind/lib
#cgo LDFLAGS: -Wl,-rpath,${SRCDIR}/../../build/lib -Wl,-rpath,${SRCDIR}/../../build-bind/lib -lllmrt
*/
import "C"
