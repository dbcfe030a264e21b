// SPDX-License-Identifier: MIT
/*
 * test_sample_math.c - the heap profile's ln and expm1 without libm
 * (src/sample_math.h) against libm's, over the domains profile.c uses.
 *
 *   ln_domain     usl_ln(x) for x = 1 - u, u every 53-bit fraction the
 *                 sampler can draw at the ends and a million spread
 *                 between them (deterministic): within 1e-12 of log(x)
 *                 relative, 1e-15 absolute near x = 1 (where log is 0).
 *   ln_exponents  usl_ln at both sides of every power of two from 2^-60
 *                 to 2^60 and at sqrt(2) (the reduction's switch).
 *   expm1_domain  usl_expm1(y) for y from -1e-12 down to -60, through
 *                 the series' range, the switch at -0.5, the range
 *                 reduction and the cut at -40: within 1e-12 of expm1(y)
 *                 relative; and 0 at 0.
 *   draws         the exponential distances the sampler draws from them
 *                 have the mean asked for (1,000,000 draws of a fixed
 *                 xorshift stream: within 1%).
 */
#include <math.h>
#include <stdint.h>

#include "../test.h"
#include "sample_math.h"

static double rel_err(double got, double want)
{
	return fabs(got - want) / fmax(fabs(want), 1e-300);
}

static void ln_domain(void)
{
	const double two53 = 9007199254740992.0;
	double worst = 0;
	uint64_t r = 88172645463325252ull;

	/* The ends: u = 0, 1/2^53 ... and 1 - k/2^53 (x tiny). */
	for (uint64_t k = 0; k < 1000; k++) {
		double x1 = 1.0 - (double)k / two53, x2 = (double)(k + 1) / two53;

		CHECK(fabs(usl_ln(x1) - log(x1)) <= 1e-15 + 1e-12 * fabs(log(x1)), "ln(%a)", x1);
		CHECK(rel_err(usl_ln(x2), log(x2)) <= 1e-12, "ln(%a)", x2);
	}
	for (int i = 0; i < 1000000; i++) {
		double x;

		r ^= r >> 12;
		r ^= r << 25;
		r ^= r >> 27;
		x = 1.0 - (double)((r * 0x2545f4914f6cdd1dull) >> 11) / two53;
		if (log(x) != 0)
			worst = fmax(worst, rel_err(usl_ln(x), log(x)));
	}
	printf("   worst relative error of ln over 10^6 draws: %.2e\n", worst);
	CHECK(worst <= 1e-12, "ln: worst relative error %.3e", worst);
}

static void ln_exponents(void)
{
	for (int e = -60; e <= 60; e++) {
		double p = ldexp(1.0, e);
		double xs[] = { p, nextafter(p, 0), nextafter(p, INFINITY), p * 1.4142135623730951,
				nextafter(p * 1.4142135623730951, 0) };

		for (unsigned int i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
			double want = log(xs[i]);

			if (want == 0)
				CHECK(usl_ln(xs[i]) == 0, "ln(1) = %a", usl_ln(xs[i]));
			else
				CHECK(rel_err(usl_ln(xs[i]), want) <= 1e-12,
				      "ln(%a) = %.17g, libm %.17g", xs[i], usl_ln(xs[i]), want);
		}
	}
}

static void expm1_domain(void)
{
	double worst = 0;

	CHECK(usl_expm1(0.0) == 0.0, "expm1(0) = %a", usl_expm1(0.0));
	for (double y = -1e-12; y >= -60; y *= 1.0001) {
		worst = fmax(worst, rel_err(usl_expm1(y), expm1(y)));
		CHECK(rel_err(usl_expm1(y), expm1(y)) <= 1e-12, "expm1(%.17g) = %.17g, libm %.17g",
		      y, usl_expm1(y), expm1(y));
	}
	for (double y = -0.4; y >= -0.6; y -= 1e-4) /* around the switch */
		CHECK(rel_err(usl_expm1(y), expm1(y)) <= 1e-12, "expm1(%.17g)", y);
	printf("   worst relative error of expm1: %.2e\n", worst);
}

static void draws(void)
{
	const double mean = 2u << 20, two53 = 9007199254740992.0;
	uint64_t r = 0x9e3779b97f4a7c15ull;
	double sum = 0;
	const int n = 1000000;

	for (int i = 0; i < n; i++) {
		r ^= r >> 12;
		r ^= r << 25;
		r ^= r >> 27;
		sum += -usl_ln(1.0 - (double)((r * 0x2545f4914f6cdd1dull) >> 11) / two53) * mean;
	}
	printf("   mean of %d draws: %.4f of the mean asked for\n", n, sum / n / mean);
	CHECK(fabs(sum / n / mean - 1) < 0.01, "mean %.4f", sum / n / mean);
}

int main(void)
{
	RUN(ln_domain);
	RUN(ln_exponents);
	RUN(expm1_domain);
	RUN(draws);
	return 0;
}
