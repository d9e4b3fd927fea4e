"""Errors come back as exceptions carrying the C API's status and message;
the context keeps serving after each."""
import pytest

import llmrt


def test_missing_model_file():
    with pytest.raises(llmrt.ModelLoadError) as e:
        llmrt.Context("/nonexistent/model.gguf")
    assert e.value.name == "LLM_ERR_IO" and e.value.message


def test_corrupt_model_file(tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"GGUF" + (3).to_bytes(4, "little") + b"\xff" * 60)  # version 3, then garbage counts
    with pytest.raises(llmrt.ModelLoadError) as e:
        llmrt.Context(p)
    assert e.value.name == "LLM_ERR_MODEL_FORMAT"


def test_bad_request_values(ctx):
    with pytest.raises(llmrt.InvalidArgumentError) as e:
        ctx.generate("hi", max_tokens=0)
    assert e.value.status == 1 and "max_tokens" in e.value.message
    with pytest.raises(llmrt.InvalidArgumentError):
        ctx.generate([1, 99999], max_tokens=4)
    with pytest.raises(llmrt.InvalidArgumentError):
        ctx.generate("hi", temperature=-1)
    with pytest.raises(ValueError):
        ctx.generate("hi", regex="a", choices=["a"])


def test_invalid_schema_names_the_problem(ctx):
    with pytest.raises(llmrt.InvalidArgumentError) as e:
        ctx.generate("hi", json_schema={"type": "object", "properties": {"a": {"type": "nosuchtype"}}})
    assert e.value.message


def test_prompt_larger_than_the_context(ctx):
    with pytest.raises(llmrt.ContextOverflowError):
        ctx.generate([1] + [300] * 600, max_tokens=4)
    assert ctx.generate("Once", max_tokens=3, temperature=0).text  # still serving


def test_bad_constructor_values():
    with pytest.raises(ValueError):
        llmrt.Context(backend="tpu")
    with pytest.raises(llmrt.InvalidArgumentError):
        llmrt.Context(gpu_memory_fraction=2.0)


def test_device_options():
    with pytest.raises(llmrt.InvalidArgumentError, match="tensor_split"):
        llmrt.Context(backend="cpu", tensor_split=[1.0, -1.0])
    with pytest.raises(ValueError, match="more than 16"):
        llmrt.Context(backend="cpu", tensor_split=[1.0] * 17)
    with llmrt.Context(backend="cpu") as c:
        assert c.devices() == []  # the CPU backend holds no device memory



def test_gpu_layers_auto():
    from llmrt import _structs as S
    assert (S.GPU_LAYERS_AUTO, S.GPU_LAYERS_ALL) == (-2, -1)
    with llmrt.Context(backend="cpu", n_gpu_layers="auto") as c:  # the CPU backend ignores it
        assert c.devices() == []
    with pytest.raises(llmrt.InvalidArgumentError, match="n_gpu_layers"):
        llmrt.Context(backend="cpu", n_gpu_layers=-3)
    with pytest.raises(ValueError, match="n_gpu_layers"):
        llmrt.Context(backend="cpu", n_gpu_layers="most")
