// Package latencystages times the stages of a change's path through the
// wrapper (reflector, handler, sync, store, watch wake-up, encode, flush)
// for BenchmarkWatchLatency. Only a build with -tags latencystages records
// anything: every other build compiles no-op stubs, so the stamps cost the
// hot path nothing.
package latencystages
