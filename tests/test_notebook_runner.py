"""tasks.py runs notebooks with nbclient, asking the shell channel again every second.

(nbclient can miss the wake-up for a cell's reply while an Output widget talks to the kernel;
a new ask finds the reply. See ``tasks.notebook_client``.)
"""

import asyncio
import queue
import sys
import time

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT))  # tasks.py, the project's entry point, lies at the root
import tasks


def test_a_long_wait_is_asked_a_second_at_a_time_and_returns_the_message():
    asked = []

    async def get_msg(timeout=None):
        asked.append(timeout)
        if len(asked) < 3:
            raise queue.Empty
        return {"msg_type": "execute_reply"}

    reply = asyncio.run(tasks.wait_in_slices(get_msg)(timeout=600))
    assert reply == {"msg_type": "execute_reply"}
    assert len(asked) == 3 and all(timeout <= 1.0 for timeout in asked)


def test_waiting_for_ever_is_asked_a_second_at_a_time():
    asked = []

    async def get_msg(timeout=None):
        asked.append(timeout)
        if len(asked) < 5:
            raise queue.Empty
        return "message"

    assert asyncio.run(tasks.wait_in_slices(get_msg)(timeout=None)) == "message"
    assert asked == [1.0] * 5


def test_wall_clock_the_timeout_still_ends_the_wait_with_empty_within_5_s():
    async def get_msg(timeout=None):
        await asyncio.sleep(timeout)
        raise queue.Empty

    started = time.monotonic()
    with pytest.raises(queue.Empty):
        asyncio.run(tasks.wait_in_slices(get_msg, slice_seconds=0.05)(timeout=0.2))
    assert 0.2 <= time.monotonic() - started < 5


def test_run_notebook_does_not_change_the_file(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells.append(nbformat.v4.new_code_cell("print(6 * 7)"))
    path = tmp_path / "small.ipynb"
    nbformat.write(notebook, path)
    before = path.read_bytes()
    executed, seconds = tasks.run_notebook(path, timeout=60)
    assert executed.cells[0].outputs[0]["text"] == "42\n"
    assert seconds > 0 and path.read_bytes() == before


def _stream(name, text):
    return {"output_type": "stream", "name": name, "text": text}


def test_a_printout_split_into_several_stream_messages_is_stored_as_one():
    import nbformat

    figure = {"output_type": "display_data", "data": {"text/plain": "<Figure>"}, "metadata": {}}
    cell = nbformat.v4.new_code_cell(
        "...", outputs=[_stream("stdout", "a\n"), _stream("stdout", "b\n"), figure]
    )
    notebook = tasks.merge_adjacent_streams(nbformat.v4.new_notebook(cells=[cell]))
    assert notebook.cells[0].outputs == [_stream("stdout", "a\nb\n"), figure]


def test_prints_on_either_side_of_a_figure_stay_on_their_side():
    import nbformat

    figure = {"output_type": "display_data", "data": {"text/plain": "<Figure>"}, "metadata": {}}
    outputs = [_stream("stdout", "before\n"), figure, _stream("stdout", "after\n")]
    cell = nbformat.v4.new_code_cell("...", outputs=[dict(o) for o in outputs])
    notebook = tasks.merge_adjacent_streams(nbformat.v4.new_notebook(cells=[cell]))
    assert notebook.cells[0].outputs == outputs
