"""The service's Python SDK, unmodified, pointed at a genapi proxy: it
generates, polls and downloads, each through the proxy.

Run as `python blackforest_through_the_proxy.py BASE_URL KEY`. The SDK knows
its models by their public names; the service's paths use the neutral
prefix (`gen-pro-1.1`), so the script tells this client instance which of
the SDK's input types that path takes, as a program may.
"""

import sys

import requests
from blackforest import BFLClient
from blackforest.types.general.client_config import ClientConfig
from blackforest.types.inputs.flux_pro_1_1 import FluxPro11Inputs

base, key = sys.argv[1], sys.argv[2]
client = BFLClient(api_key=key, base_url=base)
client.model_input_registry = dict(BFLClient.model_input_registry, **{"gen-pro-1.1": FluxPro11Inputs})
done = client.generate(
    "gen-pro-1.1",
    {"prompt": "a lighthouse at dusk", "width": 512, "height": 512},
    ClientConfig(sync=True, polling_interval=0.1, max_retries=3000),
)
sample = done.result["sample"]
assert sample.startswith(base), sample
image = requests.get(sample, timeout=60)
assert image.status_code == 200, image.status_code
assert len(image.content) > 1000, len(image.content)
print("TASK", done.id)
