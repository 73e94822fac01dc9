/* SPDX-License-Identifier: Apache-2.0 */
/* tapeflow_nvtx_recorder: an NVTX injection library that records range pushes and pops in memory,
 * so tests can check tapeflow's NVTX ranges without a GPU or a profiler.
 *
 * NVTX loads the library named by NVTX_INJECTION64_PATH on the process's first NVTX call and calls
 * its InitializeInjectionNvtx2 (the same hook Nsight Systems uses); the recorder then receives
 * nvtxDomainCreateA, nvtxDomainRegisterStringA, nvtxDomainRangePushEx/Pop and the global-domain
 * nvtxRangePushA/PushEx/Pop. A test opens the same library with dlopen (same path: same instance)
 * and reads the log through the functions below, fetched with dlsym.
 *
 * Optional: with TAPEFLOW_NVTX_LOG=<file> in the environment when NVTX attaches the recorder, the
 * whole log is written to <file> at exit, one indented line per range.
 */
#ifndef TAPEFLOW_TESTS_NVTX_RECORDER_H
#define TAPEFLOW_TESTS_NVTX_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum tapeflow_nvtx_event_kind { TAPEFLOW_NVTX_PUSH = 1, TAPEFLOW_NVTX_POP = 2 };

/* One recorded event. The strings live as long as the library stays loaded. */
typedef struct tapeflow_nvtx_event {
  int kind;            /* TAPEFLOW_NVTX_PUSH or TAPEFLOW_NVTX_POP */
  uint64_t thread;     /* the recorder's id of the calling thread (1, 2, ... in order of first event) */
  char const* domain;  /* the domain's name; "" for NVTX's global domain */
  char const* message; /* push: the range's text; pop: "" */
  int registered;      /* push: 1 when the text came from a registered string handle */
  int level;           /* push: nesting level in (thread, domain), 0 = outermost;
                          pop: level of the range it closed, -1 when none was open */
} tapeflow_nvtx_event;

/* Function types, for dlsym. */
typedef int (*tapeflow_nvtx_recorder_attachments_fn)(void);
typedef size_t (*tapeflow_nvtx_recorder_size_fn)(void);
typedef int (*tapeflow_nvtx_recorder_get_fn)(size_t index, tapeflow_nvtx_event* out);
typedef void (*tapeflow_nvtx_recorder_clear_fn)(void);
typedef uint64_t (*tapeflow_nvtx_recorder_thread_fn)(void);

/* How many NVTX instances attached this recorder (one per executable or shared library that
 * carries its own copy of the NVTX headers' implementation and made an NVTX call). */
int tapeflow_nvtx_recorder_attachments(void);
/* Events recorded since the last clear. */
size_t tapeflow_nvtx_recorder_size(void);
/* Copies event `index` to *out; returns 0 when index >= size. */
int tapeflow_nvtx_recorder_get(size_t index, tapeflow_nvtx_event* out);
/* Forgets the recorded events (domains and registered strings stay known). */
void tapeflow_nvtx_recorder_clear(void);
/* The recorder's id of the calling thread, as it appears in tapeflow_nvtx_event::thread. */
uint64_t tapeflow_nvtx_recorder_thread(void);

#ifdef __cplusplus
}
#endif

#endif /* TAPEFLOW_TESTS_NVTX_RECORDER_H */
