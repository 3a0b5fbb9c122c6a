"""A local stand-in for the Hugging Face Hub, reached through HF_ENDPOINT.

It answers what `huggingface_hub` asks when vramtui sizes a model:

- `GET /api/models/{repo}` and `/api/models/{repo}/revision/{rev}`: the model info (`sha`,
  `siblings`, `gated`);
- `HEAD` / `GET /{repo}/resolve/{rev}/{file}`, with `Range: bytes=a-b` answered 206;

and the Hub's errors, with its `X-Error-Code` / `X-Error-Message` headers: 401 `RepoNotFound`
for an unknown repository asked without a token (404 with one), 401 `GatedRepo` for a gated
file without a token, 403 `GatedRepo` with a token that was not granted access, 401 "Invalid
credentials in Authorization header" for an unknown token, 404 `RevisionNotFound` and
`EntryNotFound`.

Safetensors and GGUF files are virtual: a real header (safetensors: 8-byte length + JSON; GGUF:
written by the gguf package's GGUFWriter) describing tensors whose data is never held. Every
request is recorded; `weight_requests()` lists those that asked for a byte past a file's header,
and a plain GET of a whole weights file is refused (a sizing tool must never download weights).
"""

from __future__ import annotations

import json
import re
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote

CONFIGS = Path(__file__).resolve().parent / "data" / "hub_configs"
_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "I32": 4, "U8": 1, "I8": 1, "F8_E4M3": 1}


# --- safetensors headers ------------------------------------------------------------------------


@dataclass
class VirtualSafetensors:
    """A safetensors file of which only the header exists: its data is `data_bytes` long."""

    prefix: bytes  # 8-byte header length + JSON header
    data_bytes: int

    @property
    def size(self) -> int:
        return len(self.prefix) + self.data_bytes

    @classmethod
    def from_tensors(
        cls, tensors: list[tuple[str, str, list[int]]], header_length: int | None = None
    ) -> VirtualSafetensors:
        """From (name, dtype, shape) entries laid out one after another. `header_length`
        overrides the length written in the first 8 bytes (a hostile file)."""
        header: dict = {"__metadata__": {"format": "pt"}}
        offset = 0
        for name, dtype, shape in tensors:
            n = _BYTES[dtype]
            for d in shape:
                n *= d
            header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
            offset += n
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)  # the writer pads the header to 8 bytes
        length = len(raw) if header_length is None else header_length
        return cls(struct.pack("<Q", length) + raw, offset)


def llama_like_tensors(config: dict, dtype: str = "BF16") -> list[tuple[str, str, list[int]]]:
    """The tensors transformers saves for a Llama-style decoder (Qwen2, Gemma, Llama...):
    q/k/v/o, gate/up/down, two RMSNorms per layer; q/k/v biases for Qwen2; no lm_head when
    the embeddings are tied."""
    h, layers = config["hidden_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    hd = config.get("head_dim") or h // heads
    inter, vocab = config["intermediate_size"], config["vocab_size"]
    bias = config["model_type"] == "qwen2"
    out = [("model.embed_tokens.weight", dtype, [vocab, h])]
    for i in range(layers):
        p = f"model.layers.{i}."
        out += [
            (p + "self_attn.q_proj.weight", dtype, [heads * hd, h]),
            (p + "self_attn.k_proj.weight", dtype, [kv * hd, h]),
            (p + "self_attn.v_proj.weight", dtype, [kv * hd, h]),
            (p + "self_attn.o_proj.weight", dtype, [h, heads * hd]),
        ]
        if bias:
            out += [
                (p + "self_attn.q_proj.bias", dtype, [heads * hd]),
                (p + "self_attn.k_proj.bias", dtype, [kv * hd]),
                (p + "self_attn.v_proj.bias", dtype, [kv * hd]),
            ]
        out += [
            (p + "mlp.gate_proj.weight", dtype, [inter, h]),
            (p + "mlp.up_proj.weight", dtype, [inter, h]),
            (p + "mlp.down_proj.weight", dtype, [h, inter]),
            (p + "input_layernorm.weight", dtype, [h]),
            (p + "post_attention_layernorm.weight", dtype, [h]),
        ]
    out.append(("model.norm.weight", dtype, [h]))
    if not config.get("tie_word_embeddings", config["model_type"] == "gemma"):
        out.append(("lm_head.weight", dtype, [vocab, h]))
    return out


def sharded(tensors, shards: int) -> dict[str, VirtualSafetensors | bytes]:
    """`model-0000i-of-0000n.safetensors` files and their index, as transformers saves them."""
    size = -(-len(tensors) // shards)
    files: dict[str, VirtualSafetensors | bytes] = {}
    weight_map: dict[str, str] = {}
    total = 0
    for i in range(shards):
        name = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = tensors[i * size : (i + 1) * size]
        files[name] = VirtualSafetensors.from_tensors(part)
        total += files[name].data_bytes
        weight_map.update({t[0]: name for t in part})
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    files["model.safetensors.index.json"] = json.dumps(index, indent=2).encode()
    return files


# --- GGUF files ---------------------------------------------------------------------------------


@dataclass
class VirtualGguf:
    """A GGUF file of which only the header exists (written by the gguf package's GGUFWriter):
    its tensor data, from `data_offset` to `size`, is never held."""

    prefix: bytes  # the header: magic, counts, metadata, tensor infos
    data_offset: int  # the header padded to the alignment
    size: int
    tensor_bytes: int  # the tensors' bytes (the data region without its padding)

    @classmethod
    def write(cls, arch: str, metadata, tensors) -> VirtualGguf:
        """`metadata(writer)` adds the keys; `tensors` are (name, ggml type name, numpy-order
        shape: rows first). The data region is laid out as GGUFWriter lays it out."""
        import tempfile

        import gguf
        import numpy as np

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "header.gguf"
            w = gguf.GGUFWriter(str(path), arch)
            metadata(w)
            data = exact = 0
            for name, type_name, shape in tensors:
                qtype = gguf.GGMLQuantizationType[type_name]
                block, type_size = gguf.GGML_QUANT_SIZES[qtype]
                n = 1
                for d in shape:
                    n *= d
                nbytes = n // block * type_size
                w.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=qtype)
                data += nbytes + (-nbytes % w.data_alignment)
                exact += nbytes
            w.write_header_to_file()
            w.write_kv_data_to_file()
            w.write_ti_data_to_file()
            w.close()
            prefix = path.read_bytes()
        offset = len(prefix) + (-len(prefix) % 32)
        return cls(prefix, offset, offset + data, exact)


# llama.cpp's choice of type per tensor for a file type (llama-quant.cpp
# llama_tensor_get_type): Q4_K_M stores attn_v and ffn_down of the first and last eighth of the
# layers and of every third layer between in Q6_K, output.weight in Q6_K, the rest in Q4_K;
# a row that is not whole 256-value blocks falls back to Q5_0 (for Q4_K) or Q8_0 (for Q6_K).
# Norms and biases stay F32.
_FALLBACK = {"Q4_K": "Q5_0", "Q6_K": "Q8_0", "Q5_K": "Q5_1"}


def _more_bits(i: int, n: int) -> bool:
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def _qtype(file_type: str, leaf: str, i: int | None, n_layer: int, cols: int) -> str:
    if file_type == "Q8_0":
        t = "Q8_0"
    elif file_type == "F16":
        t = "F16"
    elif (
        leaf == "output"
        or leaf in ("attn_v", "ffn_down")
        and i is not None
        and _more_bits(i, n_layer)
    ):
        t = "Q6_K"
    else:
        t = "Q4_K"
    if t in _FALLBACK and cols % 256:
        t = _FALLBACK[t]
    return t


def llama_cpp_tensors(config: dict, file_type: str = "Q4_K_M") -> list[tuple[str, str, list]]:
    """(name, ggml type, shape rows-first) of what llama.cpp's converter writes for a
    Llama-style decoder (llama, mistral, qwen2) of this transformers config, quantised to
    `file_type` (Q4_K_M, Q8_0 or F16)."""
    h, n_layer = config["hidden_size"], config["num_hidden_layers"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads") or heads
    hd = config.get("head_dim") or h // heads
    inter, vocab = config["intermediate_size"], config["vocab_size"]
    bias = config["model_type"] == "qwen2"

    def mat(leaf: str, rows: int, cols: int, i: int | None = None):
        name = leaf if i is None else f"blk.{i}.{leaf}"
        return (f"{name}.weight", _qtype(file_type, leaf, i, n_layer, cols), [rows, cols])

    out = [mat("token_embd", vocab, h)]
    for i in range(n_layer):
        p = f"blk.{i}."
        out.append((p + "attn_norm.weight", "F32", [h]))
        out += [mat("attn_q", heads * hd, h, i), mat("attn_k", kv * hd, h, i)]
        out.append(mat("attn_v", kv * hd, h, i))
        if bias:
            out += [
                (p + "attn_q.bias", "F32", [heads * hd]),
                (p + "attn_k.bias", "F32", [kv * hd]),
                (p + "attn_v.bias", "F32", [kv * hd]),
            ]
        out.append(mat("attn_output", h, heads * hd, i))
        out.append((p + "ffn_norm.weight", "F32", [h]))
        out += [mat("ffn_gate", inter, h, i), mat("ffn_up", inter, h, i)]
        out.append(mat("ffn_down", h, inter, i))
    out.append(("output_norm.weight", "F32", [h]))
    if not config.get("tie_word_embeddings", False):
        out.append(mat("output", vocab, h))
    return out


_GGUF_MADE: dict[tuple, list[VirtualGguf]] = {}


def llama_cpp_gguf(config: dict, file_type: str = "Q4_K_M", parts: int = 1) -> list[VirtualGguf]:
    """The GGUF file(s) llama.cpp writes for `config`: the metadata llama.cpp reads
    (architecture, block count, lengths, heads, context, one token per vocabulary entry) and
    the tensor infos of `llama_cpp_tensors`; `parts` > 1 splits the tensors as gguf-split does
    (each part a header of its own, the metadata in the first). Cached for the session."""
    key = (json.dumps(config, sort_keys=True), file_type, parts)
    if key in _GGUF_MADE:
        return _GGUF_MADE[key]
    arch = "qwen2" if config["model_type"] == "qwen2" else "llama"
    tensors = llama_cpp_tensors(config, file_type)
    heads = config["num_attention_heads"]
    size = -(-len(tensors) // parts)

    def metadata(w, no: int) -> None:
        if no == 0:
            w.add_name(config.get("_name_or_path") or config["model_type"])
            w.add_block_count(config["num_hidden_layers"])
            w.add_context_length(config.get("max_position_embeddings", 4096))
            w.add_embedding_length(config["hidden_size"])
            w.add_feed_forward_length(config["intermediate_size"])
            w.add_head_count(heads)
            w.add_head_count_kv(config.get("num_key_value_heads") or heads)
            w.add_rope_freq_base(float(config.get("rope_theta", 10000.0)))
            w.add_layer_norm_rms_eps(float(config.get("rms_norm_eps", 1e-6)))
            w.add_tokenizer_model("gpt2" if arch == "qwen2" else "llama")
            w.add_token_list([b"t%d" % i for i in range(config["vocab_size"])])
        if parts > 1:
            w.add_uint16("split.no", no)
            w.add_uint16("split.count", parts)
            w.add_int32("split.tensors.count", len(tensors))

    files = [
        VirtualGguf.write(
            arch, lambda w, no=no: metadata(w, no), tensors[no * size : (no + 1) * size]
        )
        for no in range(parts)
    ]
    _GGUF_MADE[key] = files
    return files


# --- repositories -------------------------------------------------------------------------------


@dataclass
class FakeRepo:
    repo_id: str
    commit: str
    files: dict[str, VirtualSafetensors | VirtualGguf | bytes]
    refs: dict[str, str] = field(default_factory=dict)  # branch/tag -> commit
    gated: bool = False

    def __post_init__(self) -> None:
        self.refs.setdefault("main", self.commit)


def real_config(repo_id: str) -> bytes:
    return (CONFIGS / (repo_id.replace("/", "--") + ".json")).read_bytes()


def repo_from_config(
    repo_id: str, commit: str, shards: int = 1, gated: bool = False, **kw
) -> FakeRepo:
    """A repository serving the real config.json of `repo_id` and safetensors headers of its
    tensors: one `model.safetensors`, or `shards` files and an index."""
    config_bytes = real_config(repo_id)
    tensors = llama_like_tensors(json.loads(config_bytes))
    files: dict[str, VirtualSafetensors | bytes] = {"config.json": config_bytes}
    if shards == 1:
        files["model.safetensors"] = VirtualSafetensors.from_tensors(tensors)
    else:
        files.update(sharded(tensors, shards))
    files["README.md"] = b"# " + repo_id.encode() + b"\n"
    return FakeRepo(repo_id, commit, files, gated=gated, **kw)


# --- the server ---------------------------------------------------------------------------------


@dataclass
class Request:
    method: str
    path: str
    range: tuple[int, int] | None
    authorization: str | None
    status: int


class FakeHub:
    """The server; `url` is what HF_ENDPOINT is set to."""

    def __init__(self) -> None:
        self.repos: dict[str, FakeRepo] = {}
        self.tokens: set[str] = set()  # tokens the Hub knows
        self.granted: set[tuple[str, str]] = set()  # (token, repo) of accepted licences
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        hub = self

        class Handler(_Handler):
            fake = hub

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def add(self, repo: FakeRepo) -> FakeRepo:
        self.repos[repo.repo_id] = repo
        return repo

    def start(self) -> FakeHub:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def record(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)

    def weight_requests(self) -> list[Request]:
        """Requests that reached past the header of a safetensors or GGUF file (none is
        allowed): a GGUF file's header ends before its data offset."""
        out = []
        for r in self.requests:
            target = self._file_of(r.path)
            if not isinstance(target, (VirtualSafetensors, VirtualGguf)) or r.method != "GET":
                continue
            if r.range is None or r.range[1] >= len(target.prefix):
                out.append(r)
        return out

    def file_requests(self, name: str) -> list[Request]:
        return [r for r in self.requests if r.path.endswith("/" + name)]

    def _file_of(self, path: str):
        m = _RESOLVE.match(path)
        if not m:
            return None
        repo = self.repos.get(m["repo"])
        return None if repo is None else repo.files.get(m["file"])


_RESOLVE = re.compile(r"^/(?P<repo>[^/]+(?:/[^/]+)?)/resolve/(?P<rev>[^/]+)/(?P<file>.+)$")
_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+(?:/[^/]+)??)(?:/revision/(?P<rev>[^/]+))?$")


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    # -- plumbing

    def _send(self, status: int, body: bytes = b"", headers: dict | None = None) -> None:
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.fake.record(Request(self.command, self._path(), self._range, self._auth, status))

    def _error(self, status: int, code: str = "", message: str = "") -> None:
        headers = {"Content-Type": "application/json"}
        if code:
            headers["X-Error-Code"] = code
        if message:
            headers["X-Error-Message"] = message
        self._send(status, json.dumps({"error": message or code}).encode(), headers)

    def _path(self) -> str:
        """The request's path, percent-decoded as the Hub decodes it (a file name may hold any
        character)."""
        return unquote(self.path.split("?")[0])

    def _parse(self) -> None:
        auth = self.headers.get("Authorization")
        self._auth = auth.removeprefix("Bearer ").strip() if auth else None
        self._range = None
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", "").strip())
        if m:
            self._range = (int(m[1]), int(m[2]))

    def _repo_and_commit(self, repo_id: str, rev: str | None):
        """(repo, commit), or None after answering the error the Hub would give."""
        if self._auth is not None and self._auth not in self.fake.tokens:
            self._error(401, message="Invalid credentials in Authorization header")
            return None
        repo = self.fake.repos.get(repo_id)
        if repo is None:
            self._error(401 if self._auth is None else 404, "RepoNotFound", "Repository not found")
            return None
        rev = rev or "main"
        commit = repo.refs.get(rev, rev if rev == repo.commit else None)
        if commit is None:
            self._error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return None
        return repo, commit

    # -- endpoints

    def do_GET(self) -> None:
        self._parse()
        path = self._path()
        if m := _INFO.match(path):
            return self._model_info(m["repo"], m["rev"])
        if m := _RESOLVE.match(path):
            return self._resolve(m["repo"], m["rev"], m["file"])
        self._error(404, message="no such endpoint")

    def do_HEAD(self) -> None:
        self.do_GET()

    def _model_info(self, repo_id: str, rev: str | None) -> None:
        found = self._repo_and_commit(repo_id, rev)
        if found is None:
            return
        repo, commit = found
        body = {
            "_id": "fake" + commit[:20],
            "id": repo.repo_id,
            "modelId": repo.repo_id,
            "sha": commit,
            "private": False,
            "disabled": False,
            "gated": "manual" if repo.gated else False,
            "tags": [],
            "downloads": 0,
            "likes": 0,
            "siblings": [{"rfilename": name} for name in sorted(repo.files)],
        }
        self._send(200, json.dumps(body).encode(), {"Content-Type": "application/json"})

    def _resolve(self, repo_id: str, rev: str, name: str) -> None:
        found = self._repo_and_commit(repo_id, rev)
        if found is None:
            return
        repo, commit = found
        if repo.gated:
            if self._auth is None:
                return self._error(
                    401,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted. You must have access to it and "
                    "be authenticated to access it. Please log in.",
                )
            if (self._auth, repo_id) not in self.fake.granted:
                return self._error(
                    403,
                    "GatedRepo",
                    f"Access to model {repo_id} is restricted and you are not in the "
                    "authorized list.",
                )
        target = repo.files.get(name)
        if target is None:
            return self._error(404, "EntryNotFound", f"{name} does not exist on {commit}")
        headers = {"X-Repo-Commit": commit, "ETag": f'"{commit[:8]}-{name}"'}
        if isinstance(target, bytes):
            size, read = len(target), lambda a, b: target[a : b + 1]
        elif isinstance(target, VirtualGguf):
            size = target.size

            def read(a: int, b: int) -> bytes:  # past the header: zeros, and recorded
                head = target.prefix[a : b + 1]
                return head + bytes(b + 1 - a - len(head))

        else:
            size = target.size

            def read(a: int, b: int) -> bytes:
                if b >= len(target.prefix):  # recorded: weight_requests() lists it
                    return target.prefix[a:] + bytes(min(b + 1, size) - max(a, len(target.prefix)))
                return target.prefix[a : b + 1]

        if self._range is None:
            if self.command == "GET" and isinstance(target, (VirtualSafetensors, VirtualGguf)):
                return self._error(403, message="fake Hub: a whole weights file was asked for")
            headers["Content-Type"] = "application/octet-stream"
            self.send_response(200)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(size))
            self.end_headers()
            if self.command == "GET":
                self.wfile.write(read(0, size - 1))
            self.fake.record(Request(self.command, self._path(), None, self._auth, 200))
            return
        a, b = self._range
        if a >= size:
            return self._error(416, message="range not satisfiable")
        b = min(b, size - 1)
        headers["Content-Range"] = f"bytes {a}-{b}/{size}"
        self._send(206, read(a, b), headers)
