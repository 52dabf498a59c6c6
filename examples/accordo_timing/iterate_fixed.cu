// Speedup-accuracy case, the faster side: iterate.cu with the fast hardware sine.
#define SINE __sinf
#include "iterate.cu"
