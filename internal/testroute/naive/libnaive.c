/* The shared library half of the naive route (TILEPIPE_TEST_LIB). */
float naive_dot(const float *a, const float *b, int n, int stride) {
  float s = 0.0f;
  for (int k = 0; k < n; k++) s += a[k] * b[k * stride];
  return s;
}
