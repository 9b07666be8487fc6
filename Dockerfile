# One image for the API, the dask scheduler and the dask workers.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY kpca kpca
COPY store store
COPY workers workers
COPY service service
RUN pip install --no-cache-dir .
ENV KPCA_DATA_DIR=/data OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 NUMBA_CACHE_DIR=/tmp/numba
