// SPDX-License-Identifier: MIT
/*
 * probes.c - the semaphores of libuslab.so's static probes (probes.h): a
 * tracer attached to probe NAME raises uslab_NAME_semaphore. No code.
 */
#include "base.h"

PROBE_LIST(PROBE_SEMAPHORE_DEFINE)
