"""Model architecture facts: the catalogue, Hugging Face configs and safetensors headers."""
