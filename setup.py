"""The one thing pyproject.toml cannot say without setuptools' experimental `ext-modules`: the
produce validator's record walk in C (kafkalite/schema_registry/_walk.c), an optional
extension. Without a C compiler or Python's headers the build says so and goes on; kafkalite
then validates with its pure-Python walk (docs/decisions/0047)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkalite.schema_registry._walk",
            ["kafkalite/schema_registry/_walk.c"],
            optional=True,
        )
    ]
)
