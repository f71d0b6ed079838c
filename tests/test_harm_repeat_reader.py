"""Do no harm, reading a definition: cjson builds a Lua value for each JSON value, so a
definition another node wrote of 1 MiB of `{},{},...` decoded whole held Valkey 99 ms in
one tick. One over SHAPED_FROM bytes is read in its shape (`shaped`, lua/includes/
repeat_shape.lua: plain fields around one payload string, only the payload decoded); one
of another shape is decoded whole up to WHOLE_BYTES (counted DECODE_WORK times a byte
against a tick's budget), and past it not read (`shape`). Both backends."""

from __future__ import annotations

import json
import random
import re

import pytest
from harm import Events, bounded

from emq_notebook import repeat, scripts

Q = "reader"
P = f"emq:{{{Q}}}:"
INCLUDES = scripts.lua_dir() / "includes"


def constant(name: str) -> int:
    said = re.search(rf"^local {name} = (\d+)$", (INCLUDES / "repeat_def.lua").read_text(), re.M)
    assert said is not None
    return int(said.group(1))


SHAPED_FROM, WHOLE_BYTES = constant("SHAPED_FROM"), constant("WHOLE_BYTES")

# the reader alone: `shaped` and a whole decode of one text, each as a sorted dump
PROBE = (
    scripts.fragment("repeat_def")
    + """
local function dump(d)
  if not d then return 'none' end
  local keys, out = {}, {}
  for k in pairs(d) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local v, t = d[k], type(d[k])
    if v == cjson.null then v, t = 'null', 'null' end
    if t == 'number' then v = string.format('%.17g', v) end
    out[#out + 1] = k .. '=' .. t .. ':' .. tostring(v)
  end
  return table.concat(out, '|')
end
local ok, whole = pcall(cjson.decode, ARGV[1])
if not ok or type(whole) ~= 'table' then whole = nil end
local def, bad = readable(ARGV[1])
return {dump(shaped(ARGV[1])), dump(whole), tostring(bad)}
"""
)

# the layouts a definition has: register's, the script's before it (cjson's key order
# on Valkey, with `\/`; on the fake, every character past ASCII as \uXXXX), by hand;
# each (before the payload, after it, how the payload is written)
LAYOUTS = [
    (
        '{"every":60000,"payload":',
        ',"group":"","max_attempts":"1"}',
        lambda p: json.dumps(p, ensure_ascii=False),
    ),
    (
        '{"max_attempts":"3","group":"acme","payload":',
        ',"every":60000}',
        lambda p: json.dumps(p).replace("/", "\\/"),
    ),
    ('{"every":60000,"max_attempts":"3","group":"","payload":', "}", json.dumps),
    (' {\n "every" : 1000 ,\t"payload" : ', ' , "group" : "g" , "max_attempts" : 2 } ', json.dumps),
    ('{"payload":', "}", json.dumps),
    ('{"payload":', ',"every":-1e3,"every":5,"payload":7}', json.dumps),
    ('{"every":1.5e3,"payload":', ',"x":true,"y":false,"z":null,"group":null}', json.dumps),
]
# definitions of another shape: decoded whole, or not read
OTHER_SHAPES = [
    ('{"every":1,"payload":', ',"x":[1]}', json.dumps),
    ('{"every":1,"payload":', ' "x":1}', json.dumps),
    ('{"every":1,"payload":', ",}", json.dumps),
    ('{"every":1,"payload":', ',"a\\"b":1}', json.dumps),
    ('{"every":1,"meta":{"owner":"x"},"payload":', "}", json.dumps),
]


def written_in(layout, payload: str) -> str:
    before, after, written = layout
    return before + written(payload) + after


TRICKY = ["", "{}", '{"a": "b/c"}', 'x"y', "back\\slash", "ends with \\", 'ends with "', '","every":5,"z":"']
TRICKY += ["\u00e9\u20ac\U0001f600", "\x01\x7f", 'a\\"b', "\\\\", '"', "}", '{"payload":"x"}']


def payloads() -> list[str]:
    rnd = random.Random(27)
    made = [*TRICKY]
    for _ in range(60):
        made.append("".join(rnd.choice('ab"\\,:{}[] \u00e9/\n') for _ in range(rnd.randint(0, 24))))
    return made


def probe(conn, text: str) -> list[str]:
    return conn.client.eval(PROBE, 0, text)


def test_a_shaped_definition_reads_as_cjson_reads_it_whole(conn):
    """Every definition `shaped` reads is the table cjson.decode makes of it; every one
    in a writer's layout is read so, whatever its payload holds."""
    checked = 0
    for p in payloads():
        for layout in LAYOUTS:
            shaped, whole, _ = probe(conn, written_in(layout, p))
            assert shaped == whole != "none", written_in(layout, p)
            checked += 1
        for layout in OTHER_SHAPES:
            shaped, whole, _ = probe(conn, written_in(layout, p))
            assert shaped in ("none", whole), written_in(layout, p)
    assert checked == 7 * len(payloads())


@pytest.mark.parametrize("layout", range(4))
@pytest.mark.parametrize(
    "payload", ['{"q": "\\"quoted\\" a/b"}', "e\u0301t\u00e9 \u20ac \U0001f600", "ends \\"]
)
def test_a_long_definition_of_every_writers_layout_makes_its_job(harm, layout, payload):
    conn, srv = harm
    long = payload + "x" * (4 * SHAPED_FROM)
    text = written_in(LAYOUTS[layout], long)
    conn.client.zadd(P + "repeat", {"long": 0})
    conn.client.hset(P + "repeat:defs", "long", text)
    [job] = bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
    assert conn.client.hget(P + "job:" + job, "payload") == long
    assert [r["problem"] for r in repeat.registered(conn, Q)] == [None]
    assert repeat.run_now(conn, Q, "long")


def dense(n: int) -> str:
    """A definition of `n` bytes or so of small values another node wrote: a JSON object
    whose decode builds a Lua value every 3 bytes."""
    return '{"every": 1000, "payload": "{}", "x": [' + ",".join(["{}"] * (n // 3)) + "]}"


def test_a_long_definition_of_another_shape_is_not_decoded_and_says_shape(harm):
    conn, srv = harm
    conn.client.zadd(P + "repeat", {"dense": 0, "good": 1})
    big = dense(repeat.DEF_BYTES - 100)
    conn.client.hset(P + "repeat:defs", mapping={"dense": big, "good": '{"every":1000,"payload":"ok"}'})
    assert probe(conn, dense(WHOLE_BYTES + 10))[2] == "shape"
    with Events(conn, Q) as events:
        made = bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
        made += bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
    # its bytes counted as read (the call ends after it), the good one made by the next
    assert [conn.client.hget(P + "job:" + j, "payload") for j in made] == ["ok"]
    assert [e["error"] for e in events.seen if e["event"] == "bad_row"] == ["bad definition shape"]
    assert conn.client.hget(P + "repeat:defs", "dense") == big
    # a listing says what the tick found, asking the server (one rule): JSON an object
    # of every field, yet no tick reads it
    assert {r["name"]: r["problem"] for r in repeat.registered(conn, Q)} == {
        "dense": "bad shape",
        "good": None,
    }


def test_a_short_definition_of_another_shape_is_decoded_whole_and_counted_so(harm):
    """One of another shape at most WHOLE_BYTES is read whole (a field of a nested value
    another node added is no harm), counted DECODE_WORK times its bytes: a tick's byte
    budget holds one of WHOLE_BYTES, so the one behind it waits for the next call."""
    conn, srv = harm
    meta = [{"n": i} for i in range(4_000)]
    pad = WHOLE_BYTES - len(json.dumps({"every": 1000, "payload": "", "meta": meta}))
    nested = json.dumps({"every": 1000, "payload": "n" * pad, "meta": meta})
    assert len(nested) == WHOLE_BYTES
    conn.client.zadd(P + "repeat", {"nested": 0, "next": 1})
    conn.client.hset(P + "repeat:defs", mapping={"nested": nested, "next": '{"every":1000,"payload":"next"}'})
    first = bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
    second = bounded(lambda: repeat.tick(conn, Q), srv, what="tick")
    payloads = [conn.client.hget(P + "job:" + j, "payload") for j in first + second]
    assert (len(first), payloads) == (1, ["n" * pad, "next"])
    assert [r["problem"] for r in repeat.registered(conn, Q)] == [None, None]


@pytest.mark.parametrize(
    ("text", "bad"),
    [
        ('{"every": 0, "payload": "%s"}', "every"),
        ('{"every": 1000, "payload": 7, "pad": "%s"}', "payload"),
        ('{"every": 1000, "payload": "%s", "group": 3}', "group"),
        ('{"every": 1000, "payload": "%s", "max_attempts": "three"}', "max_attempts"),
        ('{"every": 1000, "payload": "%s" "x": 1}', "definition"),
    ],
)
def test_a_long_shaped_definition_is_checked_as_a_short_one(conn, text, bad):
    assert probe(conn, text % ("p" * 2 * SHAPED_FROM))[2] == bad
    assert probe(conn, text % "p")[2] == bad
