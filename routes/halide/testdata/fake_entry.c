/* fake_entry: deliberately broken entries for halide_test.go, to show the
 * driver's checks can fail. FAKE selects the fault; the signature is
 * in:COUNT out:COUNT with COUNT = 4. */
#include <string.h>

int tilepipe_entry(void *const *buffers) {
    const float *in = buffers[0];
    float *out = buffers[1];
#if FAKE == 1 /* writes one element past the end of the output */
    for (int i = 0; i <= 4; i++) out[i] = in[i % 4];
#elif FAKE == 2 /* leaves the last output element alone */
    for (int i = 0; i < 3; i++) out[i] = in[i];
#elif FAKE == 3 /* scribbles on its input */
    ((float *)buffers[0])[2] = 0;
    memcpy(out, in, 16);
#elif FAKE == 4 /* a different answer each call */
    static float n;
    for (int i = 0; i < 4; i++) out[i] = in[i] + n;
    n += 1;
#elif FAKE == 5 /* reports failure */
    (void)in;
    (void)out;
    return 7;
#else
    memcpy(out, in, 16);
#endif
    return 0;
}
