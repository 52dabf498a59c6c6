#!/bin/sh
# aos_field's own test: out[i] = 0.5 * x of particle i for all 2^23 particles, checked through the
# weighted checksum the program prints. The expected value was computed independently on the host
# (NumPy in float32, with and without a fused multiply-add in particle_value: 8841.7317 both ways, to
# the 7 digits printed). Any data layout passes; reading another field or another particle does not.
# Run it in the project folder after `make`; it is the example's --unittest_command.
set -eu
got=$(./bin/aos_field 2 | sed -n 's/^checksum: //p')
awk -v got="$got" -v want=8841.7317 'BEGIN {
    d = got - want; if (d < 0) d = -d
    if (got == "" || d > 2e-3) { printf "checksum %s, expected %s\n", got, want; exit 1 }
    printf "ok: checksum %s\n", got
}'
