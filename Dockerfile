# axbgate API/web service image (docker-compose.yml: services `migrate` and `api`).
#
# BASE_IMAGE: the official Python image by default; any Debian bookworm image works (the
# compose test builds FROM a debootstrap-made local/debian:bookworm, as no registry is
# reachable there): Debian's own python3 (3.11) is installed when the base has none.
#
# The Slurm executor writes each gate's folder under AXBGATE_DATA_DIR and starts the
# allocation driver with THIS image's interpreter path (the plan records sys.executable),
# so the data directory and an axbgate installation must exist at the same paths on the
# compute nodes: build with AXBGATE_PREFIX pointing at a directory of the shared
# filesystem and mount that filesystem at the same path (README, "Shared deployment").
ARG BASE_IMAGE=python:3.11-slim-bookworm

# Stage `deps`: system packages and the Python dependencies; changes only with this file and
# pyproject.toml (the compose test caches it across runs: scripts/docker_build.sh).
FROM ${BASE_IMAGE} AS deps

ARG AXBGATE_PREFIX=/shared/axbgate
ENV VIRTUAL_ENV=${AXBGATE_PREFIX}/venv \
    PATH=${AXBGATE_PREFIX}/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git: re-gates resolve and check out tracked branches. slurm-client (Debian 12: Slurm
# 22.05, match the cluster's major version) brings sbatch/squeue/sacct/scancel and
# libmunge; the munge socket and /etc/slurm come from the host at run time.
RUN apt-get update \
    && pkgs="git slurm-client ca-certificates" \
    && if ! command -v python3 >/dev/null; then pkgs="$pkgs python3 python3-venv"; fi \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $pkgs \
    && rm -rf /var/lib/apt/lists/*

# EXTRA_CA_CERTS: PEM text of certificate authorities to trust in addition to Debian's
# (a TLS-intercepting egress proxy; the compose test passes the host's local CAs); pip
# then uses the system bundle instead of its own.
ARG EXTRA_CA_CERTS=""
RUN if [ -n "${EXTRA_CA_CERTS}" ]; then \
        printf '%s\n' "${EXTRA_CA_CERTS}" > /usr/local/share/ca-certificates/axbgate-extra.crt \
        && update-ca-certificates > /dev/null; \
    fi
ENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# Dependencies first, from pyproject.toml alone (a placeholder README, no packages yet), so
# that a change of the sources re-runs only the small install below. The service needs no
# torch (the `trainer` extra); install that on the compute nodes' interpreter instead.
WORKDIR /src
COPY pyproject.toml ./
RUN python3 -m venv "${VIRTUAL_ENV}" \
    && pip install -q --upgrade pip \
    && touch README.md \
    && pip install -q . \
    && pip uninstall -q -y axbgate

# Stage `app`: the sources.
FROM deps AS app
COPY README.md ./
COPY orchestrator ./orchestrator
COPY trainer ./trainer
COPY health ./health
COPY axbgate_record ./axbgate_record
COPY migrations ./migrations
RUN pip install -q --no-deps . && rm -rf build *.egg-info && axbgate --help > /dev/null

# Run as the cluster account that submits the gates (munge authenticates the uid):
# docker-compose.yml sets `user:` from AXBGATE_UID/AXBGATE_GID.
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=4)"]
CMD ["axbgate", "serve", "--host", "0.0.0.0", "--port", "8000"]
