# syntax=docker/dockerfile:1
# IntelliPerf images. One Dockerfile, three targets:
#
#   service      the API and dashboard (`intelliperf serve --no-worker`): the `service` extra only, no CUDA
#   worker-cuda  a GPU node (`intelliperf worker`): CUDA toolkit (nvcc, CUPTI), Nsight Compute, and the
#                service, worker and llm extras
#   worker-rocm  the AMD worker's image: ROCm with rocprofv3 (not yet run on AMD hardware; see that stage)
#
#   docker build --target service -t intelliperf-service .
#   docker build --target worker-cuda -t intelliperf-worker .
#
# The base images are build arguments. The defaults are current public tags, but no registry can be
# reached where this file was written, so only the service target was built there (from a local Debian
# bookworm image, see scripts/build-service-image); the CUDA and ROCm tags are unverified.
#
# Offline builds: a wheelhouse in the build context (.wheelhouse/*.whl, git-ignored; made by
# scripts/build-service-image) is used by the service target with `pip --no-index --find-links`, and
# its constraints.txt (exported from uv.lock) pins every version; it must hold every dependency, pip
# itself (a base without pip runs pip straight from its wheel) and setuptools and wheel (to build this
# project). Without a wheelhouse, pip installs from the index as usual. The worker targets only prefer
# the wheelhouse (`--find-links`, the index stays on): their Python (Ubuntu 24.04: 3.12) is not the
# service's, and their extras are larger.

ARG SERVICE_BASE=python:3.11-slim-bookworm
ARG CUDA_BASE=nvidia/cuda:13.0.1-devel-ubuntu24.04
ARG ROCM_BASE=rocm/dev-ubuntu-24.04:6.4.4-complete

# The build context (.dockerignore allows only the package's sources and the wheelhouse).
FROM scratch AS sources
COPY . /src


# --- service ---------------------------------------------------------------------------------------

FROM ${SERVICE_BASE} AS service-build
COPY --from=sources /src /src
# A virtual environment in /opt/intelliperf, copied whole into the final stage (same base, same python).
RUN set -eu; \
    W=/src/.wheelhouse; \
    if ls "$W"/*.whl >/dev/null 2>&1; then \
        python3 -m venv --without-pip /opt/intelliperf; \
        /opt/intelliperf/bin/python "$(ls "$W"/pip-*.whl | tail -n 1)/pip" install --quiet \
            --no-index --find-links "$W" pip; \
        set -- --no-index --find-links "$W"; \
    else \
        python3 -m venv /opt/intelliperf; \
        set --; \
    fi; \
    if [ -f "$W/constraints.txt" ]; then set -- "$@" --constraint "$W/constraints.txt"; fi; \
    /opt/intelliperf/bin/python -m pip install --quiet --no-cache-dir --disable-pip-version-check "$@" \
        "/src[service]"; \
    /opt/intelliperf/bin/python -m pip uninstall --yes --quiet pip

FROM ${SERVICE_BASE} AS service
LABEL org.opencontainers.image.title="intelliperf-service" \
      org.opencontainers.image.description="IntelliPerf API and dashboard (intelliperf serve --no-worker)"
# A fixed, unprivileged uid; the data folder (the embedded SQLite and broker, when no database and
# broker URL are set) is its home.
RUN useradd --uid 10001 --user-group --home-dir /var/lib/intelliperf --create-home \
        --shell /usr/sbin/nologin intelliperf
COPY --from=service-build /opt/intelliperf /opt/intelliperf
ENV PATH=/opt/intelliperf/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    INTELLIPERF_DATA_DIR=/var/lib/intelliperf \
    INTELLIPERF_PORT=8000
USER 10001:10001
WORKDIR /var/lib/intelliperf
EXPOSE 8000
# urllib, so the image needs no curl. INTELLIPERF_PORT is read here and by the command below only.
HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('INTELLIPERF_PORT', '8000'), timeout=4)"]
# --verbose: the container's log (docker logs) is the server's whole log, every request included, as it
# was before `serve` kept its log in the data folder and printed only job events
CMD ["sh", "-c", "exec intelliperf serve --no-worker --verbose --host 0.0.0.0 --port \"${INTELLIPERF_PORT:-8000}\""]


# --- worker-cuda -------------------------------------------------------------------------------------

FROM ${CUDA_BASE} AS worker-cuda
LABEL org.opencontainers.image.title="intelliperf-worker-cuda" \
      org.opencontainers.image.description="IntelliPerf GPU worker (intelliperf worker): CUDA, CUPTI, nvdisasm"
ARG DEBIAN_FRONTEND=noninteractive
# Python for the worker, git for cloning jobs' repositories, g++/make for the projects and for Accordo's
# CUPTI library (built below, when the image is built; it also runs the counter pass). The counter pass
# reads the kernels' machine code with the toolkit's nvdisasm, which the devel images carry (cuda-nvdisasm);
# Nsight Compute is not needed.
RUN set -eu; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3 python3-venv python3-dev git make g++ ca-certificates; \
    if [ ! -x /usr/local/cuda/bin/nvdisasm ]; then \
        v=$(echo "${CUDA_VERSION:?the CUDA base image sets CUDA_VERSION}" | cut -d. -f1,2 | tr . -); \
        apt-get install -y --no-install-recommends "cuda-nvdisasm-$v"; \
    fi; \
    test -x /usr/local/cuda/bin/nvdisasm; \
    test -d /usr/local/cuda/extras/CUPTI/include; \
    rm -rf /var/lib/apt/lists/*
COPY --from=sources /src /src
RUN set -eu; \
    W=/src/.wheelhouse; \
    python3 -m venv /opt/intelliperf; \
    if ls "$W"/*.whl >/dev/null 2>&1; then set -- --find-links "$W"; else set --; fi; \
    /opt/intelliperf/bin/python -m pip install --no-cache-dir --disable-pip-version-check "$@" \
        "/src[service,worker,llm]"; \
    rm -rf /src
# The native profiler (a CUPTI injection library), built here (g++ and the CUDA headers are in this image) and not in a job's
# first timing pass; root builds it, every user reads it.
ENV INTELLIPERF_PROFILER_CACHE_DIR=/opt/intelliperf/profiler
RUN /opt/intelliperf/bin/intelliperf prepare
# Non-root: the NVIDIA container toolkit makes the GPU's device nodes usable by any user, so CUDA works.
# The hardware counters (CUPTI's profiler), however, are admin-only unless the HOST's driver allows everyone
# (options nvidia NVreg_RestrictProfilingToAdminUsers=0, then reload the module or reboot). Where that
# cannot be set, run this image with `--user 0 --cap-add SYS_ADMIN` (compose: user: "0", cap_add).
# (.cache: the profiler's built library; data: the embedded defaults. Made here so volumes mounted there are
# the user's.)
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/intelliperf intelliperf \
    && install -d -o 10001 -g 10001 /home/intelliperf/.cache /home/intelliperf/data
ENV PATH=/opt/intelliperf/bin:/usr/local/cuda/bin:$PATH \
    CUDA_HOME=/usr/local/cuda \
    PYTHONUNBUFFERED=1 \
    INTELLIPERF_EXECUTOR=local \
    INTELLIPERF_DATA_DIR=/home/intelliperf/data
USER 10001:10001
WORKDIR /home/intelliperf
# The heartbeat, not `celery inspect ping`: a solo-pool worker answers no ping while it runs a job (hours),
# but its heartbeat thread keeps beating. Healthy when a worker of this host beat within worker_stale_s.
HEALTHCHECK --interval=30s --timeout=20s --start-period=120s --retries=3 \
    CMD ["python", "-m", "worker.health"]
CMD ["intelliperf", "worker"]


# --- worker-rocm -------------------------------------------------------------------------------------

# NOT YET RUN ON AMD HARDWARE: IntelliPerf's AMD backend (intelliperf/gpu/amd/backend.py: rocprofv3's kernel
# trace and counters) and its GPU probe (amd-smi, rocm-smi) are built and tested against the tools'
# documented formats only. `intelliperf worker` here serves gpu.amd.<gfx> and gpu.amd.any; rewrites are
# judged by the job's --unittest_command (Accordo captures CUDA launches only).
FROM ${ROCM_BASE} AS worker-rocm
LABEL org.opencontainers.image.title="intelliperf-worker-rocm" \
      org.opencontainers.image.description="IntelliPerf worker for AMD GPUs (not yet run on AMD hardware)"
ARG DEBIAN_FRONTEND=noninteractive
RUN set -eu; \
    apt-get update; \
    apt-get install -y --no-install-recommends python3 python3-venv python3-dev git make g++ ca-certificates; \
    if ! command -v rocprofv3 >/dev/null 2>&1 && [ ! -x /opt/rocm/bin/rocprofv3 ]; then \
        apt-get install -y --no-install-recommends rocprofiler-sdk; \
    fi; \
    test -x /opt/rocm/bin/rocprofv3; \
    rm -rf /var/lib/apt/lists/*
COPY --from=sources /src /src
RUN set -eu; \
    W=/src/.wheelhouse; \
    python3 -m venv /opt/intelliperf; \
    if ls "$W"/*.whl >/dev/null 2>&1; then set -- --find-links "$W"; else set --; fi; \
    /opt/intelliperf/bin/python -m pip install --no-cache-dir --disable-pip-version-check "$@" \
        "/src[service,worker,llm]"; \
    rm -rf /src
# Non-root; the host's /dev/kfd and /dev/dri are passed with `--device` and the user joins their groups
# (`--group-add video --group-add render`, the render group's gid is the host's).
RUN useradd --uid 10001 --user-group --create-home --home-dir /home/intelliperf --groups video intelliperf \
    && install -d -o 10001 -g 10001 /home/intelliperf/.cache /home/intelliperf/data
ENV PATH=/opt/intelliperf/bin:/opt/rocm/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    INTELLIPERF_EXECUTOR=local \
    INTELLIPERF_DATA_DIR=/home/intelliperf/data
USER 10001:10001
WORKDIR /home/intelliperf
CMD ["intelliperf", "worker"]
