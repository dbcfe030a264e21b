/* SPDX-License-Identifier: MIT */
/*
 * sample_math.h - the two transcendental functions the heap profile's
 * sampling needs (profile.c), without libm.
 *
 * Linking libm cost a process that loads uslab and not libm itself
 * (sed, xz, zstd, git, python3, sort) about 380 KiB of resident memory,
 * the pages ld.so touches to load it: sed's peak RSS under the malloc
 * drop-in, median of 10 runs, 3,446 KiB with libm and 3,068 KiB without;
 * all that for two calls made once per sample. These approximations are
 * within 1e-12 relative of libm's over the whole domain the profile uses
 * (tests/unit/test_sample_math.c; the worst it found: 3e-14 for ln, 9e-16
 * for expm1), far below what a sampling distance or a sample's weight needs.
 *
 * Doubles are taken apart by their bits (IEEE 754 binary64, as on every
 * target uslab builds for; memcpy of 8 bytes compiles to a move); no
 * function of libm is called.
 */
#ifndef USLAB_SAMPLE_MATH_H
#define USLAB_SAMPLE_MATH_H

#include <stdint.h>
#include <string.h>

#define USL_LN2 0.693147180559945309417

/*
 * usl_ln - the natural logarithm of @x, for 0 < @x < infinity (finite,
 * normal). x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln(m) = 2 atanh(s)
 * with s = (m - 1) / (m + 1), |s| < 0.172, its series to s^15 (the next
 * term is below 4e-14 of the sum).
 */
static inline double usl_ln(double x)
{
	uint64_t bits;
	double m, s, s2, sum;
	int e;

	memcpy(&bits, &x, sizeof(bits));
	e = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull; /* m in [1, 2) */
	memcpy(&m, &bits, sizeof(m));
	if (m > 1.41421356237309504880) {
		m *= 0.5;
		e++;
	}
	s = (m - 1.0) / (m + 1.0);
	s2 = s * s;
	sum = 1.0 / 15;
	for (int k = 13; k >= 1; k -= 2)
		sum = sum * s2 + 1.0 / k;
	return 2.0 * s * sum + e * USL_LN2;
}

/*
 * usl_expm1 - e^@y - 1, for @y <= 0 (the heap profile's -r / T).
 * Near 0 its Taylor series (no cancellation); below -0.5, e^y by range
 * reduction (y = k ln 2 + f, |f| <= ln 2 / 2, e^f by its series, 2^k by
 * the exponent's bits) minus 1; below -40, e^y is under 2^-57: -1.
 */
static inline double usl_expm1(double y)
{
	double term, sum, f;
	uint64_t bits;
	double scale;
	int k;

	if (y < -40.0)
		return -1.0;
	if (y > -0.5) {
		/* sum_{n>=1} y^n / n!, to n = 16: the next term is below 1e-16 of the sum. */
		term = y;
		sum = y;
		for (int n = 2; n <= 16; n++) {
			term *= y / n;
			sum += term;
		}
		return sum;
	}
	k = (int)(y / USL_LN2 - 0.5); /* rounded to nearest (y < 0) */
	f = y - k * USL_LN2;
	term = 1.0;
	sum = 1.0;
	for (int n = 1; n <= 14; n++) {
		term *= f / n;
		sum += term;
	}
	bits = (uint64_t)(1023 + k) << 52; /* 2^k, k >= -58: a normal double */
	memcpy(&scale, &bits, sizeof(scale));
	return sum * scale - 1.0;
}

#endif /* USLAB_SAMPLE_MATH_H */
