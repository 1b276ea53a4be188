/*
 * fuzz.h - what the libFuzzer targets (tests/fuzz_*.c) share: how a broken
 * invariant stops the run, and libFuzzer's entry points.
 */
#ifndef BW_FUZZ_H
#define BW_FUZZ_H

#include <stddef.h>
#include <stdint.h>

/* A trap, not abort(): libFuzzer reports it as a crash with the input
 * that caused it, and it fires in optimised builds too. */
#define REQUIRE(c)                          \
	do {                                \
		if (!(c))                   \
			__builtin_trap();   \
	} while (0)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif /* BW_FUZZ_H */
