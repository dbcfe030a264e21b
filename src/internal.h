/* SPDX-License-Identifier: MIT */
/*
 * internal.h - every internal header, for the white-box tests of tests/unit.
 * No file of src/ includes it: each includes the header of its tier
 * (base.h has the layering rule and the list of tiers).
 */
#ifndef USLAB_INTERNAL_H
#define USLAB_INTERNAL_H

#include "front.h"

#endif /* USLAB_INTERNAL_H */
