/* llmrt loaded at run time (as Python's ctypes, C#'s P/Invoke and other
 * language runtimes load it: dlopen, RTLD_LOCAL) must leave the process's
 * allocator alone: a C++ library loaded after it allocates and frees in
 * its static initializers and destructors (probe.cpp, as llama.cpp's does)
 * and must run. Before the fix libllmrt.so carried libmimalloc.so, whose
 * malloc/free then reached the later library's frees of glibc's blocks:
 * a crash at exit.
 *
 *   dlopen_alongside LIBLLMRT PROBE   (exit 0: both loaded, used, unloaded) */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s LIBLLMRT PROBE\n", argv[0]);
    return 2;
  }
  void* llm = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (llm == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
    return 1;
  }
  const char* (*version)(void) = (const char* (*)(void))dlsym(llm, "llm_version");
  void* probe = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
  if (probe == NULL) {
    fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
    return 1;
  }
  int (*probe_size)(void) = (int (*)(void))dlsym(probe, "probe_size");
  if (probe_size == NULL || probe_size() != 205) {
    fprintf(stderr, "the probe library does not work beside llmrt\n");
    return 1;
  }
  printf("llmrt %s and a C++ library loaded after it: ok\n", version ? version() : "(no version symbol)");
  dlclose(probe);
  dlclose(llm);
  return 0;
}
