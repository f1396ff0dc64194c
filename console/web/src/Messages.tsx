import { FormEvent, KeyboardEvent, useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import { MessagePage, Msg, Raw, TopicDetail, TopicRow, api, get } from "./api";
import { ErrorBox, formatTime, href, useLoad } from "./common";

type Decoding = "text" | "json" | "hex" | "base64";
const OVERSCAN = 10; // rows rendered beyond the view on each side

// A browse page asks for compact messages: no base64 when the bytes are UTF-8 text (they are
// that text, encoded), a third of the JSON to parse for 1 KiB values.
function bytesOf(raw: Raw): Uint8Array {
  if (raw.base64 === undefined) return new TextEncoder().encode(raw.text ?? "");
  const bin = atob(raw.base64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function base64Of(raw: Raw): string {
  if (raw.base64 !== undefined) return raw.base64;
  let bin = "";
  for (const b of bytesOf(raw)) bin += String.fromCharCode(b);
  return btoa(bin);
}

export function decode(raw: Raw | null, how: Decoding): string {
  if (raw === null) return "null";
  if (how === "base64") return base64Of(raw);
  if (how === "hex")
    return Array.from(bytesOf(raw), (b) => b.toString(16).padStart(2, "0")).join(" ");
  const text = raw.text ?? `(binary, ${raw.size} bytes; use hex or base64)`;
  if (how === "json" && raw.text !== null) {
    try {
      return JSON.stringify(JSON.parse(raw.text), null, 2);
    } catch {
      return `${text}  (not JSON)`;
    }
  }
  return text;
}

// The table shows the start of each value (laying out 1,000 long cells is what costs); the
// selected message's pane shows all of it.
function cell(raw: Raw | null, how: Decoding): string {
  if (raw && raw.size > 300 && (how === "text" || how === "json") && raw.text !== null) return raw.text.slice(0, 200) + "…";
  const text = decode(raw, how === "json" ? "text" : how);
  return text.length > 300 ? text.slice(0, 200) + "…" : text;
}

function JsonView({ value }: { value: unknown }) {
  if (value !== null && typeof value === "object") {
    const entries = Array.isArray(value) ? value.map((v, i) => [String(i), v] as const) : Object.entries(value);
    return (
      <details open className="json">
        <summary>{Array.isArray(value) ? `[${entries.length}]` : `{${entries.length}}`}</summary>
        <ul>
          {entries.map(([k, v]) => (
            <li key={k}>
              <span className="json-key">{k}</span>: <JsonView value={v} />
            </li>
          ))}
        </ul>
      </details>
    );
  }
  return <span className="json-leaf">{JSON.stringify(value)}</span>;
}

function Value({ raw, how }: { raw: Raw | null; how: Decoding }) {
  if (how === "json" && raw?.text) {
    try {
      return <JsonView value={JSON.parse(raw.text)} />;
    } catch {
      /* not JSON: shown as text */
    }
    return <pre>{decode(raw, "text")}</pre>;
  }
  return <pre>{decode(raw, how)}</pre>;
}

export function Messages({ topic }: { topic: string }) {
  const topics = useLoad(() => get<{ topics: TopicRow[] }>("/api/topics"), []);
  const detail = useLoad(() => get<TopicDetail>(`/api/topics/${encodeURIComponent(topic)}`), [topic]);
  const [partition, setPartition] = useState("all");
  const [start, setStart] = useState("newest");
  const [offset, setOffset] = useState("0");
  const [time, setTime] = useState("");
  const [limit, setLimit] = useState("100");
  const [filter, setFilter] = useState("");
  const [how, setHow] = useState<Decoding>("text");
  const [page, setPage] = useState<MessagePage | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [selected, setSelected] = useState<Msg | null>(null);
  const [loading, setLoading] = useState(false);

  const box = useRef<HTMLDivElement>(null);
  const [scrollTop, setScrollTop] = useState(0);
  const [viewHeight, setViewHeight] = useState(560);
  const [rowHeight, setRowHeight] = useState(31);
  const [focusIndex, setFocusIndex] = useState<number | null>(null);
  const rows = page?.messages ?? [];
  // Only the rows in view (and OVERSCAN either side) are in the DOM: laying out 1,000 rows
  // took most of a page's 300 ms budget (docs/benchmarks.md, "Web console").
  const first = Math.max(0, Math.floor(scrollTop / rowHeight) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((scrollTop + viewHeight) / rowHeight) + OVERSCAN);
  useLayoutEffect(() => {
    const row = box.current?.querySelector<HTMLElement>('tbody tr[data-testid="message-row"]');
    if (row && row.offsetHeight > 0 && Math.abs(row.offsetHeight - rowHeight) > 0.5) setRowHeight(row.offsetHeight);
    if (box.current && box.current.clientHeight > 0) setViewHeight(box.current.clientHeight);
  }, [page, rowHeight]);
  useEffect(() => {
    if (box.current) box.current.scrollTop = 0;
    setScrollTop(0);
  }, [page]);
  // The row moved to by the keyboard is focused once it is rendered; scrolling by wheel or
  // pointer hands the focus back to the user (no jumping back to that row).
  const keyboardMove = useRef(false);
  useEffect(() => {
    if (focusIndex === null || !keyboardMove.current) return;
    const row = box.current?.querySelector<HTMLElement>(`tr[data-index="${focusIndex}"]`);
    if (row) {
      row.focus({ preventScroll: true });
      keyboardMove.current = false;
    }
  }, [focusIndex, first, last]);
  const onRowKey = (e: KeyboardEvent, i: number) => {
    if (e.key === "Enter") setSelected(rows[i]);
    const to = e.key === "ArrowDown" ? i + 1 : e.key === "ArrowUp" ? i - 1 : e.key === "Home" ? 0 : e.key === "End" ? rows.length - 1 : null;
    if (to === null || to < 0 || to >= rows.length || !box.current) return;
    e.preventDefault();
    keyboardMove.current = true;
    const top = to * rowHeight;
    const header = box.current.querySelector("thead")?.clientHeight ?? 0;
    if (top < box.current.scrollTop) box.current.scrollTop = top;
    else if (top + rowHeight + header > box.current.scrollTop + box.current.clientHeight) box.current.scrollTop = top + rowHeight + header - box.current.clientHeight;
    setFocusIndex(to);
  };

  const query = useMemo(() => {
    const q = new URLSearchParams({ start, limit, filter });
    if (partition !== "all") q.set("partition", partition);
    if (start === "offset") q.set("offset", offset);
    if (start === "timestamp") q.set("timestamp", time ? String(Date.parse(time + "Z")) : "");
    return q.toString();
  }, [partition, start, offset, time, limit, filter]);
  const base = `/api/topics/${encodeURIComponent(topic)}/messages`;

  const load = async (e?: FormEvent) => {
    e?.preventDefault();
    setLoading(true);
    try {
      setPage(await get<MessagePage>(`${base}?${query}&compact=1`));
      setError(null);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    } finally {
      setLoading(false);
    }
  };
  useEffect(() => {
    setSelected(null);
    void load();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [topic]);

  const partitions = detail.data?.partitions ?? [];
  return (
    <section>
      <h1>
        Messages in <span className="mono">{topic}</span>
      </h1>
      <div className="toolbar">
        <label>
          Topic{" "}
          <select value={topic} onChange={(e) => (window.location.hash = href("messages", e.target.value))}>
            {(topics.data?.topics ?? []).map((t) => (
              <option key={t.name}>{t.name}</option>
            ))}
          </select>
        </label>
        <a href={href("topics", topic)}>Topic details</a>
      </div>
      <ErrorBox error={detail.error} />
      <form className="panel" onSubmit={(e) => void load(e)} aria-label="Browse messages">
        <label>
          Partition
          <select name="partition" value={partition} onChange={(e) => setPartition(e.target.value)}>
            <option value="all">all</option>
            {partitions.map((p) => (
              <option key={p.partition} value={p.partition}>
                {p.partition} ({p.log_start_offset}–{p.log_end_offset})
              </option>
            ))}
          </select>
        </label>
        <label>
          From
          <select name="start" value={start} onChange={(e) => setStart(e.target.value)}>
            <option value="newest">newest</option>
            <option value="oldest">oldest</option>
            <option value="offset">offset</option>
            <option value="timestamp">timestamp</option>
          </select>
        </label>
        {start === "offset" && (
          <label>
            Offset <input name="offset" value={offset} onChange={(e) => setOffset(e.target.value)} size={10} />
          </label>
        )}
        {start === "timestamp" && (
          <label>
            Time (UTC) <input name="timestamp" type="datetime-local" step="1" value={time} onChange={(e) => setTime(e.target.value)} />
          </label>
        )}
        <label>
          Limit <input name="limit" value={limit} onChange={(e) => setLimit(e.target.value)} size={5} />
        </label>
        <label className="wide">
          Filter{" "}
          <input
            name="filter"
            className="mono"
            value={filter}
            onChange={(e) => setFilter(e.target.value)}
            placeholder={'key == "a" and (value contains "x" or header["h"] != null) and value.user.id > 3'}
          />
        </label>
        <label>
          Decode
          <select name="decode" value={how} onChange={(e) => setHow(e.target.value as Decoding)}>
            <option value="text">text</option>
            <option value="json">JSON</option>
            <option value="hex">hex</option>
            <option value="base64">base64</option>
          </select>
        </label>
        <button type="submit" disabled={loading}>
          {loading ? "Loading…" : "Load"}
        </button>
        <a className="button" href={`${base}/export?${query}&format=json`} download={`${topic}.json`}>
          Export JSON
        </a>
        <a className="button" href={`${base}/export?${query}&format=csv`} download={`${topic}.csv`}>
          Export CSV
        </a>
      </form>
      <ErrorBox error={error} />
      {page && (
        <p className="muted" data-testid="message-count">
          {page.messages.length} messages (scanned {page.scanned})
        </p>
      )}
      <div className="split">
        <div
          className="rows"
          ref={box}
          onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}
          onWheel={() => (keyboardMove.current = false)}
          onPointerDown={() => (keyboardMove.current = false)}
        >
          <table className="messages" aria-rowcount={rows.length + 1}>
            <colgroup>
              <col style={{ width: "5.5rem" }} />
              <col style={{ width: "7rem" }} />
              <col style={{ width: "15.5rem" }} />
              <col style={{ width: "18%" }} />
              <col />
            </colgroup>
            <thead>
              <tr aria-rowindex={1}>
                <th>Partition</th>
                <th>Offset</th>
                <th>Timestamp</th>
                <th>Key</th>
                <th>Value</th>
              </tr>
            </thead>
            <tbody>
              {first > 0 && (
                <tr aria-hidden="true" className="spacer" style={{ height: first * rowHeight }}>
                  <td colSpan={5} />
                </tr>
              )}
              {rows.slice(first, last).map((m, j) => (
                <tr
                  key={`${m.partition}-${m.offset}`}
                  tabIndex={0}
                  aria-rowindex={first + j + 2}
                  data-index={first + j}
                  className={selected === m ? "selected" : ""}
                  onClick={() => setSelected(m)}
                  onKeyDown={(e) => onRowKey(e, first + j)}
                  data-testid="message-row"
                >
                  <td>{m.partition}</td>
                  <td>{m.offset}</td>
                  <td>{formatTime(m.timestamp)}</td>
                  <td className="mono clip">{cell(m.key_raw, how)}</td>
                  <td className="mono clip">{cell(m.value_raw, how)}</td>
                </tr>
              ))}
              {last < rows.length && (
                <tr aria-hidden="true" className="spacer" style={{ height: (rows.length - last) * rowHeight }}>
                  <td colSpan={5} />
                </tr>
              )}
            </tbody>
          </table>
        </div>
        {selected && <MessageDetail m={selected} how={how} topics={(topics.data?.topics ?? []).map((t) => t.name)} />}
      </div>
      <Produce topic={topic} partitions={partitions.map((p) => p.partition)} onDone={() => void load()} />
      <LiveTail topic={topic} filter={filter} how={how} />
    </section>
  );
}

function MessageDetail({ m, how, topics }: { m: Msg; how: Decoding; topics: string[] }) {
  const [target, setTarget] = useState("");
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const reproduce = async () => {
    try {
      const r = await api<{ topic: string; partition: number; offset: number }>("POST", "/api/reproduce", {
        topic: m.topic,
        partition: m.partition,
        offset: m.offset,
        to_topic: target,
      });
      setStatus(`Re-produced to ${r.topic}/${r.partition} at offset ${r.offset}`);
      setError(null);
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <aside className="panel detail" aria-label="Selected message">
      <h2>
        {m.topic}/{m.partition} @ {m.offset}
      </h2>
      <p className="muted">{formatTime(m.timestamp)}</p>
      <h3>Key</h3>
      <Value raw={m.key_raw} how={how} />
      <h3>Value</h3>
      <Value raw={m.value_raw} how={how} />
      <h3>Headers</h3>
      {m.headers.length === 0 ? (
        <p className="muted">none</p>
      ) : (
        <table>
          <tbody>
            {m.headers.map(([k, v], i) => (
              <tr key={i}>
                <td className="mono">{k}</td>
                <td className="mono">{v ?? "null"}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h3>Re-produce to another topic</h3>
      <label>
        Topic{" "}
        <select aria-label="Re-produce target" value={target} onChange={(e) => setTarget(e.target.value)}>
          <option value="">choose…</option>
          {topics.map((t) => (
            <option key={t}>{t}</option>
          ))}
        </select>
      </label>{" "}
      <button disabled={!target} onClick={() => void reproduce()}>
        Re-produce
      </button>
      {status && <p role="status">{status}</p>}
      <ErrorBox error={error} />
    </aside>
  );
}

function Produce({ topic, partitions, onDone }: { topic: string; partitions: number[]; onDone: () => void }) {
  const [key, setKey] = useState("");
  const [value, setValue] = useState("");
  const [headers, setHeaders] = useState("");
  const [partition, setPartition] = useState("");
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const pairs: [string, string][] = [];
    for (const line of headers.split("\n").map((l) => l.trim()).filter(Boolean)) {
      const at = line.indexOf("=");
      if (at < 1) {
        setError(`header line "${line}" is not name=value`);
        return;
      }
      pairs.push([line.slice(0, at), line.slice(at + 1)]);
    }
    try {
      const r = await api<{ partition: number; offset: number }>("POST", `/api/topics/${encodeURIComponent(topic)}/messages`, {
        key: key === "" ? null : key,
        value,
        headers: pairs,
        partition: partition === "" ? null : Number(partition),
      });
      setStatus(`Produced to partition ${r.partition} at offset ${r.offset}`);
      setError(null);
      onDone();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <details className="panel">
      <summary>Produce a message</summary>
      <form onSubmit={(e) => void submit(e)} aria-label="Produce a message">
        <label>
          Key <input name="key" value={key} onChange={(e) => setKey(e.target.value)} />
        </label>
        <label>
          Partition
          <select name="produce-partition" value={partition} onChange={(e) => setPartition(e.target.value)}>
            <option value="">by key (partitioner)</option>
            {partitions.map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label className="wide">
          Value <textarea name="value" rows={3} value={value} onChange={(e) => setValue(e.target.value)} />
        </label>
        <label className="wide">
          Headers (name=value per line) <textarea name="headers" rows={2} value={headers} onChange={(e) => setHeaders(e.target.value)} />
        </label>
        <button type="submit">Produce</button>
        {status && <p role="status">{status}</p>}
        <ErrorBox error={error} />
      </form>
    </details>
  );
}

function LiveTail({ topic, filter, how }: { topic: string; filter: string; how: Decoding }) {
  const [on, setOn] = useState(false);
  const [connected, setConnected] = useState(false);
  const [messages, setMessages] = useState<Msg[]>([]);
  const [skipped, setSkipped] = useState(0);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setConnected(false);
    if (!on) return;
    setMessages([]);
    setSkipped(0);
    setError(null);
    const source = new EventSource(`/api/topics/${encodeURIComponent(topic)}/tail?${new URLSearchParams({ filter })}`);
    source.onmessage = (event) => {
      const data = JSON.parse(event.data) as { messages?: Msg[]; skipped?: number; error?: string };
      if (data.error) setError(data.error);
      if (data.messages?.length) setMessages((old) => [...data.messages!.slice().reverse(), ...old].slice(0, 200));
      if (data.skipped) setSkipped((s) => s + data.skipped!);
    };
    source.onerror = () => {
      setConnected(false);
      setError("live tail interrupted; reconnecting…");
    };
    // Open means the server fixed its start offsets: anything produced from now on shows.
    source.onopen = () => {
      setConnected(true);
      setError(null);
    };
    return () => source.close();
  }, [on, topic, filter]);
  return (
    <div className="panel">
      <h2>Live tail</h2>
      <button onClick={() => setOn(!on)} aria-pressed={on}>
        {on ? "Stop live tail" : "Start live tail"}
      </button>{" "}
      {on && connected && <span className="muted">following new messages{filter ? " matching the filter" : ""}; skipped {skipped}</span>}
      <ErrorBox error={error} />
      <ul className="tail" data-testid="live-tail">
        {messages.map((m) => (
          <li key={`${m.partition}-${m.offset}`} className="mono">
            [{m.partition}@{m.offset}] {m.key ?? "null"} → {decode(m.value_raw, how === "json" ? "text" : how)}
          </li>
        ))}
      </ul>
    </div>
  );
}
