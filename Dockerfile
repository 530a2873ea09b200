# axbgate API/web service with the nightly re-gate scheduler (docker-compose.yml).
#
# The Slurm executor writes each gate's folder under AXBGATE_DATA_DIR and starts the
# allocation driver with THIS image's interpreter (the plan records sys.executable), so
# both the data directory and the virtual environment must exist at the same paths on
# the compute nodes: build with AXBGATE_PREFIX pointing at a directory of the shared
# filesystem and mount that filesystem at the same path (see README, "Shared deployment").
FROM python:3.11-slim-bookworm

ARG AXBGATE_PREFIX=/shared/axbgate
ENV AXBGATE_PREFIX=${AXBGATE_PREFIX} \
    VIRTUAL_ENV=${AXBGATE_PREFIX}/venv \
    PATH=${AXBGATE_PREFIX}/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1

# git: re-gates resolve and check out tracked branches. slurm-client (Debian 12: Slurm
# 22.05, match the cluster's major version) brings sbatch/squeue/sacct/scancel and
# libmunge; the munge socket and /etc/slurm come from the host at run time.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git slurm-client ca-certificates \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /src
COPY pyproject.toml README.md ./
COPY orchestrator ./orchestrator
COPY trainer ./trainer
COPY health ./health
COPY migrations ./migrations

# CPU torch wheels: the service itself never touches a GPU; allocations that need CUDA
# use the same interpreter on the compute nodes, so build a CUDA variant there with
# --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu124.
ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
RUN python -m venv "${VIRTUAL_ENV}" \
    && pip install --upgrade pip \
    && pip install --extra-index-url "${TORCH_INDEX}" . \
    && axbgate --help > /dev/null

# Run as the cluster account that submits the gates (munge authenticates the uid):
# docker-compose.yml sets `user:` from AXBGATE_UID/AXBGATE_GID.
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
CMD ["axbgate", "serve", "--host", "0.0.0.0", "--port", "8000"]
