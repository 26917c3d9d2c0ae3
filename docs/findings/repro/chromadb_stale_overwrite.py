"""chromadb: an upsert carrying an older fact replaces the newer one; the last write to land
wins, since Chroma compares no version.

Run with chromadb 1.5.x (pip install chromadb). Exits 1 while the older fact wins.
"""

import os
import sys

os.environ["ANONYMIZED_TELEMETRY"] = "False"

import chromadb

client = chromadb.EphemeralClient()
facts = client.create_collection("facts", embedding_function=None)
vector = [[1.0, 0.0, 0.0]]
facts.upsert(ids=["alice/city"], documents=["lives in Rome"], embeddings=vector,
             metadatas=[{"entity": "alice", "causal_seq": 5}])
facts.upsert(ids=["alice/city"], documents=["lives in Paris"], embeddings=vector,
             metadatas=[{"entity": "alice", "causal_seq": 3}])  # older, arrives late
served = facts.get(ids=["alice/city"])
print(f"after seq 5 then a late seq 3: {served['documents']} {served['metadatas']}")
if served["documents"] != ["lives in Rome"]:
    print("expected the newer fact, seq 5: ['lives in Rome']")
    sys.exit(1)
