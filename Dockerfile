# One image for the API, the dask scheduler and the dask workers.
FROM python:3.11-slim

# Installed from a build folder that is then removed: the API (python -m service) and the dask
# workers (the dask command) import the same files, those of site-packages, so they share one
# numba cache (numba keys its cache by source path).
WORKDIR /build
# The dependencies first, at the exact versions of uv.lock (those make install and CI test), each file
# checked against the lock's hashes: uv only writes them out as a requirements file (its dependencies
# without the test and bench extras or the project itself) and is then removed; pip installs them.
COPY pyproject.toml uv.lock README.md ./
RUN pip install --no-cache-dir uv \
    && uv export --quiet --frozen --no-dev --no-emit-project --format requirements.txt -o requirements.txt \
    && pip install --no-cache-dir --require-hashes -r requirements.txt \
    && pip uninstall --yes uv
# Then the project itself, into the same site-packages, with no dependency resolved again.
COPY kpca kpca
COPY store store
COPY workers workers
COPY service service
COPY client client
RUN pip install --no-cache-dir --no-deps . && rm -rf /build

# A non-root user owns the data folder and the numba cache; nothing else is writable to it.
RUN useradd --create-home --uid 10001 kpca \
    && mkdir -p /data /app/.numba-cache \
    && chown kpca:kpca /data /app/.numba-cache
ENV KPCA_DATA_DIR=/data OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_CACHE_DIR=/app/.numba-cache
WORKDIR /app
USER kpca

# Compile every jitted kernel now (tiny fits of every solver and kernel, float32 and float64), so that
# containers start with a full cache instead of compiling on their first requests.
RUN python -m kpca.warmup

EXPOSE 8000
# /healthz needs no API key; 127.0.0.1 must stay among KPCA_ALLOWED_HOSTS (the default includes it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4).status != 200)"]
# Listening on every interface needs API keys (KPCA_API_KEYS or KPCA_API_KEYS_FILE): without them the
# service refuses to start (exit 2). The scheduler and workers override this command.
CMD ["python", "-m", "service", "--host", "0.0.0.0", "--port", "8000", "--data-dir", "/data"]
