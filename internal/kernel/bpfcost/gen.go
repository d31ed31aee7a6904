package bpfcost

// The BPF programs are compiled by bpf2go with clang (Debian: clang llvm
// libbpf-dev); the generated cost_bpfel.go and cost_bpfel.o are committed so
// that a normal `go build` needs no clang. `make generate` regenerates them.
//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -target bpfel -type cost -type napi_key -type napi_val cost bpf/cost.bpf.c -- -O2 -g -Wall -Werror
