"""autogen-ext ChromaDBVectorMemory stores the same fact twice: every add is a new memory.

Run with autogen-ext 0.7.x and chromadb 1.5.x (pip install "autogen-ext[chromadb]").
Exits 1 while the fact is stored twice. The embedding is a fixed stand-in, so nothing is
downloaded; the duplicate does not depend on it.
"""

import asyncio
import os
import sys
import tempfile

os.environ["ANONYMIZED_TELEMETRY"] = "False"

from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.memory.chromadb import (
    ChromaDBVectorMemory,
    CustomEmbeddingFunctionConfig,
    PersistentChromaDBVectorMemoryConfig,
)
from chromadb.utils.embedding_functions import EmbeddingFunction


class Fixed(EmbeddingFunction):
    def __init__(self) -> None: ...
    def __call__(self, input: list[str]) -> list[list[float]]:
        return [[float(len(text)), 1.0, 0.0] for text in input]


async def main() -> int:
    memory = ChromaDBVectorMemory(config=PersistentChromaDBVectorMemoryConfig(
        persistence_path=tempfile.mkdtemp(), k=10,
        embedding_function_config=CustomEmbeddingFunctionConfig(function=Fixed)))
    fact = MemoryContent(content="alice lives in Paris", mime_type=MemoryMimeType.TEXT)
    await memory.add(fact)
    await memory.add(fact)
    found = [r.content for r in (await memory.query("where does alice live?")).results]
    print(f"memories for one fact: {found}")
    if len(found) != 1:
        print("expected the fact once: ['alice lives in Paris']")
        return 1
    return 0


sys.exit(asyncio.run(main()))
