/* The validating half of the naive route (TILEPIPE_TEST_VALIDATES): runs the
 * built kernel once on the inputs capture wrote and writes its outputs, as a
 * route that runs its own build would. Usage, one triple per signature param
 * in order: validate ROLE PATH BYTES ... (ROLE is input or output). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tilepipe_entry(void *const *buffers);

int main(int argc, char **argv) {
  if (argc < 4 || (argc - 1) % 3 != 0) {
    fprintf(stderr, "usage: validate ROLE PATH BYTES ...\n");
    return 2;
  }
  int n = (argc - 1) / 3;
  void **buf = calloc(n, sizeof *buf);
  for (int i = 0; i < n; i++) {
    const char *role = argv[1 + 3 * i], *path = argv[2 + 3 * i];
    size_t bytes = strtoul(argv[3 + 3 * i], NULL, 10);
    buf[i] = calloc(1, bytes + 1);
    if (strcmp(role, "input") == 0) {
      FILE *f = fopen(path, "rb");
      if (!f || fread(buf[i], 1, bytes, f) != bytes || fgetc(f) != EOF) {
        fprintf(stderr, "validate: input %s: want exactly %zu bytes\n", path, bytes);
        return 1;
      }
      fclose(f);
    }
  }
  int rc = tilepipe_entry(buf);
  if (rc != 0) {
    fprintf(stderr, "validate: entry returned %d\n", rc);
    return 1;
  }
  for (int i = 0; i < n; i++) {
    const char *role = argv[1 + 3 * i], *path = argv[2 + 3 * i];
    size_t bytes = strtoul(argv[3 + 3 * i], NULL, 10);
    if (strcmp(role, "output") != 0) continue;
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(buf[i], 1, bytes, f) != bytes || fclose(f) != 0) {
      fprintf(stderr, "validate: output %s: write failed\n", path);
      return 1;
    }
  }
  return 0;
}
