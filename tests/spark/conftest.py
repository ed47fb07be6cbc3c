"""One local Spark session for the Spark tests (2 cores, no UI), or a skip."""

import os
import shutil
import sys

import pytest


def _java_missing() -> bool:
    home = os.environ.get("JAVA_HOME")
    return shutil.which("java") is None and not (
        home and os.path.exists(os.path.join(home, "bin", "java"))
    )


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark", reason="pyspark is not installed (skcal[spark])")
    if _java_missing():
        pytest.skip("Spark needs a Java runtime: no `java` on PATH nor JAVA_HOME")
    from pyspark.sql import SparkSession

    # the executors' Python is this one (skcal and numpy importable there)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("skcal-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
