"""Images through the server's three chat routes, with the official clients: OpenAI chat completions (image_url data
URLs), Anthropic messages (base64 image blocks) and OpenAI responses (input_image), against a `minfer serve` of a tiny
random Gemma3ForConditionalGeneration (tests/reference/vision_reference.py; its agreement with the PyTorch reference is
tests/python/test_vision.py's). The three routes answer the same greedy tokens for the same image, equal to
`minfer generate --image` on the prompt the chat template rendered; another image changes the first token's
distribution; http(s) URLs, file:// outside --allowed-local-media-path, bad base64 and undecodable files are 400s
naming the field."""

from __future__ import annotations

import base64
import io
import math
import subprocess

import anthropic
import openai
import pytest
from PIL import Image

from conftest import ids_arg  # noqa: F401 (puts tests/reference on sys.path)
from serve_process import post_json as post, serve
from vision_reference import make_tiny_gemma3_vision

PHOTO = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"


def png(size, flip=False) -> bytes:
    img = Image.open(PHOTO).convert("RGB").resize(size, Image.BICUBIC)
    if flip:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def model_dir(minfer, tmp_path_factory):
    root = tmp_path_factory.mktemp("gemma3_vision_server")
    minfer.run("make-test-model", "--preset", "tiny-gemma3", "--out", root / "text", "--quiet")
    make_tiny_gemma3_vision(str(root / "text"), str(root / "model"))
    return root / "model"


@pytest.fixture(scope="module")
def server(minfer, model_dir, tmp_path_factory):
    media = tmp_path_factory.mktemp("media")
    (media / "photo.png").write_bytes(png((64, 48)))
    with serve(minfer.binary, "--model", model_dir, "--served-model-name", "g", "--max-model-len", "512",
               "--allowed-local-media-path", media) as url:
        yield url, media


GREEDY = dict(max_tokens=8, temperature=0)


def chat_messages(image_url: str) -> list:
    return [{"role": "user", "content": [{"type": "text", "text": "What is in the picture?"},
                                         {"type": "image_url", "image_url": {"url": image_url}}]}]


def test_three_routes_agree_with_the_cli(server, minfer, model_dir, tmp_path):
    url, _ = server
    image = png((97, 61))
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
    chat = client.chat.completions.create(model="g", messages=chat_messages(data_url(image)), logprobs=True,
                                          extra_body={"return_token_ids": True, "ignore_eos": True}, **GREEDY)
    tokens = chat.choices[0].token_ids
    assert len(tokens) == 8

    claude = anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0)
    message = claude.messages.create(
        model="g", max_tokens=8, extra_body={"temperature": 0, "ignore_eos": True},
        messages=[{"role": "user", "content": [
            {"type": "text", "text": "What is in the picture?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(image).decode()}}]}])
    assert message.content[0].text == chat.choices[0].message.content

    response = client.responses.create(
        model="g", max_output_tokens=8, temperature=0, extra_body={"ignore_eos": True},
        input=[{"role": "user", "content": [{"type": "input_text", "text": "What is in the picture?"},
                                            {"type": "input_image", "image_url": data_url(image)}]}])
    assert response.output_text == chat.choices[0].message.content

    # The CLI on the prompt the template rendered (the server's prompt ids), with the same image file.
    (tmp_path / "image.png").write_bytes(image)
    proc = minfer.run("generate", "--model", model_dir, "--prompt-ids", " ".join(map(str, chat.prompt_token_ids)),
                      "--image", tmp_path / "image.png", "-n", 8, "--temperature", 0, "--ignore-eos")
    assert chat.choices[0].message.content in proc.stdout

    # Another image: the first token's distribution changes.
    other = client.chat.completions.create(model="g", messages=chat_messages(data_url(png((97, 61), flip=True))),
                                           logprobs=True, extra_body={"ignore_eos": True}, **GREEDY)
    first = chat.choices[0].logprobs.content[0].logprob
    assert not math.isclose(other.choices[0].logprobs.content[0].logprob, first, rel_tol=1e-6)


def test_local_files_only_under_the_allowed_path(server):
    url, media = server
    status, body = post(url, "/v1/chat/completions",
                        {"model": "g", "messages": chat_messages(f"file://{media}/photo.png"), **GREEDY})
    assert status == 200, body
    status, body = post(url, "/v1/chat/completions",
                        {"model": "g", "messages": chat_messages(f"file://{media}/../photo.png"), **GREEDY})
    assert status == 400 and "allowed-local-media-path" in body["error"]["message"]


@pytest.mark.parametrize("image_url,needle", [
    ("https://example.com/cat.png", "fetches nothing"),
    ("data:image/png;base64,@@@not base64@@@", "not valid base64"),
    ("data:image/png;base64," + base64.b64encode(b"GIF89a garbage").decode(), "GIF"),
    ("data:image/png,plain", "base64 data URL"),
])
def test_bad_images_are_400s_naming_the_field(server, image_url, needle):
    url, _ = server
    status, body = post(url, "/v1/chat/completions", {"model": "g", "messages": chat_messages(image_url), **GREEDY})
    assert status == 400, body
    assert needle in body["error"]["message"]
    assert body["error"]["param"].startswith("messages")
    # The server is still up and serving.
    status, _ = post(url, "/v1/chat/completions", {"model": "g", "messages": chat_messages(data_url(png((8, 8)))),
                                                   **GREEDY})
    assert status == 200
