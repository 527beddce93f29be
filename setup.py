"""The one thing pyproject.toml cannot say without setuptools' experimental `ext-modules`: two
optional C extensions, the produce validator's record walk (kafkalite/schema_registry/_walk.c)
and the release of the empty pools CPython's arenas keep (kafkalite/network/_pools.c). Without
a C compiler or Python's headers the build says so and goes on; kafkalite then validates with
its pure-Python walk (docs/decisions/0047) and leaves the empty pools resident (0074)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalite.schema_registry._walk",
            ["kafkalite/schema_registry/_walk.c"],
            optional=True,
        ),
        Extension(
            "kafkalite.network._pools",
            ["kafkalite/network/_pools.c"],
            optional=True,
        ),
    ]
)
