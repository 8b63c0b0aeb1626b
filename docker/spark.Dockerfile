# Spark with the Percolator connector: the project (from this repository's files) plus PySpark
# and pyarrow, on a JRE, for the Spark master, the Spark workers and `spark-submit`.
#
#   docker build -f docker/spark.Dockerfile -t percolator-spark .    # from the repository root
#
# Spark itself comes from the pyspark wheel (it carries Spark's jars and bin/spark-class), so
# the Spark version is the one the connector is built for: keep PYSPARK_SPEC and PYARROW_SPEC
# in step with the dev extras of pyproject.toml (tests/docker checks it). Debian bookworm is
# pinned for its OpenJDK 17 (docs/spark.md: Java 17 runs Spark). See docs/docker.md.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG PYSPARK_SPEC="pyspark>=4.3,<4.4"
ARG PYARROW_SPEC="pyarrow>=15"
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/percolator
WORKDIR /src
COPY pyproject.toml README.md ./
COPY server ./server
COPY clients ./clients
COPY connectors ./connectors
COPY bench ./bench
COPY examples ./examples
COPY docker/healthcheck.py ./docker/healthcheck.py
RUN /opt/percolator/bin/pip install . "${PYSPARK_SPEC}" "${PYARROW_SPEC}" \
 && install -m 0755 docker/healthcheck.py /opt/percolator/bin/percolator-healthcheck

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="percolator-spark" \
      org.opencontainers.image.description="Spark (from PySpark) with the Percolator connector" \
      org.opencontainers.image.licenses="Apache-2.0"
# procps: Spark's launch scripts call ps. man1: the JRE's postinst links its man pages there,
# and slim images have no such directory.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /opt/percolator /opt/percolator
ENV PATH=/opt/percolator/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SPARK_HOME=/opt/percolator/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/percolator/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/percolator/bin/python \
    SPARK_WORKER_DIR=/var/lib/spark/work \
    SPARK_NO_DAEMONIZE=1
RUN groupadd --system --gid 10001 spark \
 && useradd --system --uid 10001 --gid spark --home-dir /var/lib/spark --create-home \
        --shell /usr/sbin/nologin spark \
 && mkdir -p /var/lib/spark/work /var/lib/spark/jobs \
 && chown -R spark:spark /var/lib/spark \
 && test -x "$SPARK_HOME/bin/spark-class"
USER spark
WORKDIR /var/lib/spark
# 7077: the master's RPC port; 8080: the master's web UI; 8081: a worker's web UI;
# 4040: a driver's web UI.
EXPOSE 7077 8080 8081 4040
ENTRYPOINT ["spark-class"]
CMD ["org.apache.spark.deploy.master.Master"]
