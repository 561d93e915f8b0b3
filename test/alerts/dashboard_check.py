#!/usr/bin/env python3
"""Checks the Grafana dashboard that the chart ships (charts/.../dashboards/*.json).

Run by meson as the unit test `dashboard_check`: `dashboard_check.py DASHBOARD.json`. Grafana
accepts almost any JSON and shows a typo in a metric name as an empty panel, so this reads every
PromQL expression and fails on a metric or label that the controller does not export (the list
below is the contract of DESIGN.md section 8), on a query that ignores the $job or $driver
variable, and on panels without the ${datasource} variable, a unit, a unique id or a free spot
on the grid. Standard library only; single-threaded.
"""

import json
import re
import sys

DASHBOARD_UID = "resourceslice-controller"

# Labels every scraped series may carry: the job and instance from the scrape, the rest from a
# ServiceMonitor or the Kubernetes service discovery.
TARGET_LABELS = {"job", "instance", "namespace", "pod", "service", "container", "endpoint"}

# Metric name -> its own labels (DESIGN.md section 8). Keep in step with metrics/.
METRICS = {
    "up": set(),
    "resourceslice_controller_pools": {"driver"},
    "resourceslice_controller_slices": {"driver"},
    "resourceslice_controller_devices": {"driver"},
    "resourceslice_controller_slice_writes_total": {"driver", "verb", "result"},
    "resourceslice_controller_pushes_total": {"driver", "code"},
    "resourceslice_controller_inventory_refusals_total": {"reason"},
    "resourceslice_controller_pool_lease_expirations_total": {"driver"},
    "resourceslice_controller_pool_holds_total": {"driver"},
    "resourceslice_controller_pull_fetches_total": {"driver", "result"},
    "resourceslice_controller_pull_last_success_timestamp_seconds": {"driver"},
    "resourceslice_controller_pull_source_expired": {"driver"},
    "resourceslice_controller_pull_sources": {"driver"},
    "resourceslice_controller_watch_restarts_total": {"resource", "reason"},
    "resourceslice_controller_build_info": {"version", "git_commit", "cpp_compiler"},
    "controller_runtime_reconcile_total": {"controller", "result"},
    "controller_runtime_reconcile_errors_total": {"controller"},
    "controller_runtime_active_workers": {"controller"},
    "workqueue_depth": {"name"},
    "workqueue_adds_total": {"name"},
    "workqueue_retries_total": {"name"},
    "workqueue_longest_running_processor_seconds": {"name"},
    "rest_client_requests_total": {"code", "method", "host"},
    "leader_election_master_status": {"name"},
    "process_cpu_seconds_total": set(),
    "process_resident_memory_bytes": set(),
    "process_open_fds": set(),
    "process_max_fds": set(),
    "process_start_time_seconds": set(),
}

# Histograms exist in Prometheus only as their _bucket, _sum and _count series.
HISTOGRAMS = {
    "resourceslice_controller_publish_latency_seconds": {"driver"},
    "resourceslice_controller_pull_fetch_duration_seconds": {"driver"},
    "controller_runtime_reconcile_time_seconds": {"controller"},
    "workqueue_queue_duration_seconds": {"name"},
    "workqueue_work_duration_seconds": {"name"},
    "rest_client_request_duration_seconds": {"verb", "host"},
}

# Metrics with a driver label: panels must honour the $driver selection on them.
DRIVER_METRICS = {name for name, labels in {**METRICS, **HISTOGRAMS}.items() if "driver" in labels}


def known_series():
    """Every series name a query may select, with the labels it carries."""
    series = {name: labels | TARGET_LABELS for name, labels in METRICS.items()}
    for name, labels in HISTOGRAMS.items():
        series[name + "_bucket"] = labels | TARGET_LABELS | {"le"}
        series[name + "_sum"] = labels | TARGET_LABELS
        series[name + "_count"] = labels | TARGET_LABELS
    return series


SERIES = known_series()

# Aggregation operators may put their by/without clause before the parenthesis.
AGGREGATIONS = {"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values",
                "bottomk", "topk", "quantile"}
PROMQL_FUNCTIONS = AGGREGATIONS | {
    "abs", "absent", "absent_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min",
    "day_of_month", "day_of_week", "day_of_year", "days_in_month", "delta", "deriv", "exp",
    "floor", "histogram_quantile", "holt_winters", "hour", "idelta", "increase", "irate",
    "label_join", "label_replace", "ln", "log2", "log10", "minute", "month", "predict_linear",
    "rate", "resets", "round", "scalar", "sgn", "sort", "sort_desc", "sqrt", "time",
    "timestamp", "vector", "year", "avg_over_time", "min_over_time", "max_over_time",
    "sum_over_time", "count_over_time", "quantile_over_time", "stddev_over_time",
    "stdvar_over_time", "last_over_time", "present_over_time",
}
GROUPING_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right"}
OTHER_KEYWORDS = {"and", "or", "unless", "bool", "offset", "atan2", "inf", "nan"}
GRAFANA_BUILTINS = {"__rate_interval", "__interval", "__interval_ms", "__range", "__range_s",
                    "__range_ms"}

TOKEN_RE = re.compile(r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<var>\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*|\[\[[A-Za-z_][A-Za-z0-9_]*\]\])
  | (?P<number>(?:0x[0-9a-fA-F]+|\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+)[a-zA-Z]*)
  | (?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|==|!=|<=|>=|[-+*/%^<>=(){}\[\],@])
""", re.VERBOSE)


def tokenize(expr):
    tokens = []
    pos = 0
    while pos < len(expr):
        m = TOKEN_RE.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read PromQL at {expr[pos:pos + 20]!r}")
        pos = m.end()
        if m.lastgroup != "space":
            tokens.append((m.lastgroup, m.group()))
    return tokens


def var_name(token_text):
    """`$x`, `${x}`, `${x:csv}` and `[[x]]` all name the variable x."""
    text = token_text.strip("$[]{}")
    return text.split(":", 1)[0]


def unquote(token_text):
    return token_text[1:-1]


def check_expr(expr, variables, *, require_job=True, require_driver=True, legend=""):
    """Returns the problems found in one PromQL expression (an empty list when it is fine).
    Panel queries must filter on $job and, where the metric has a driver label, on $driver."""
    try:
        return parse_expr(tokenize(expr), expr, variables, require_job, require_driver, legend)
    except ValueError as e:
        return [f"{e}: {expr}"]


def parse_expr(tokens, expr, variables, require_job, require_driver, legend):
    problems = []
    used_labels = set()  # label names the expression groups by or shows in the legend
    allowed_labels = set(TARGET_LABELS)
    depth = 0
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        nxt = tokens[i + 1][1] if i + 1 < len(tokens) else None
        if kind == "var":
            if var_name(text) not in variables and var_name(text) not in GRAFANA_BUILTINS:
                problems.append(f"undefined variable {text}")
        elif text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth < 0:
                problems.append("unbalanced parentheses")
                depth = 0
        elif text == "[":
            # Range or subquery: durations and variables only, no names to check.
            close = index_of(tokens, i, "]")
            for k, t in tokens[i + 1:close]:
                if k == "var" and var_name(t) not in variables | GRAFANA_BUILTINS:
                    problems.append(f"undefined variable {t}")
            i = close
        elif text == "{":
            problems.append("a selector without a metric name: " + expr)
            i = index_of(tokens, i, "}")
        elif kind == "ident":
            lower = text.lower()
            if lower in GROUPING_KEYWORDS:
                if nxt == "(":
                    close = index_of(tokens, i + 1, ")")
                    used_labels.update(t for k, t in tokens[i + 2:close] if k == "ident")
                    i = close
            elif lower in OTHER_KEYWORDS or text in AGGREGATIONS:
                pass
            elif nxt == "(":
                if text not in PROMQL_FUNCTIONS:
                    problems.append(f"unknown function {text}()")
            else:
                i, selector_problems = check_selector(tokens, i, variables, require_job,
                                                      require_driver)
                problems += selector_problems
                allowed_labels |= SERIES.get(text, set())
        i += 1
    if depth != 0:
        problems.append("unbalanced parentheses")
    used_labels |= set(re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}", legend))
    for label in sorted(used_labels - allowed_labels):
        problems.append(f"label {label} is not on any metric of the expression")
    return problems


def index_of(tokens, start, closing):
    for j in range(start, len(tokens)):
        if tokens[j][1] == closing:
            return j
    raise ValueError(f"no {closing} after {tokens[start][1]}")


def base_name(series):
    """The metric a series belongs to: a histogram's _bucket, _sum and _count belong to it."""
    for suffix in ("_bucket", "_sum", "_count"):
        if series.endswith(suffix) and series.removesuffix(suffix) in HISTOGRAMS:
            return series.removesuffix(suffix)
    return series


def check_selector(tokens, i, variables, require_job, require_driver):
    """Checks the series name at tokens[i] and its {matchers}; returns (index of the last token
    of the selector, problems)."""
    name = tokens[i][1]
    problems = []
    if name not in SERIES:
        if name in HISTOGRAMS:
            problems.append(f"{name} is a histogram: select {name}_bucket, _sum or _count")
        else:
            problems.append(f"unknown metric {name}")
    matchers = {}
    if i + 1 < len(tokens) and tokens[i + 1][1] == "{":
        close = index_of(tokens, i + 1, "}")
        inner = [t for t in tokens[i + 2:close] if t[1] != ","]
        for j in range(0, len(inner) - 2, 3):
            (lk, label), (_, op), (vk, value) = inner[j:j + 3]
            if lk != "ident" or vk != "string" or op not in ("=", "!=", "=~", "!~"):
                problems.append(f"cannot read the matchers of {name}")
                break
            matchers[label] = (op, unquote(value))
        if len(inner) % 3:
            problems.append(f"cannot read the matchers of {name}")
        i = close
    if name in SERIES:
        for label in sorted(set(matchers) - SERIES[name]):
            problems.append(f"{name} has no label {label}")
    if require_job and matchers.get("job") not in (("=", "$job"), ("=~", "$job")):
        problems.append(f'{name} does not select job="$job"')
    if require_driver and base_name(name) in DRIVER_METRICS \
            and matchers.get("driver") != ("=~", "$driver"):
        problems.append(f'{name} does not select driver=~"$driver"')
    for value in (v for _, v in matchers.values()):
        for ref in re.findall(r"\$\{[^}]*\}|\$[A-Za-z_][A-Za-z0-9_]*", value):
            if var_name(ref) not in variables | GRAFANA_BUILTINS:
                problems.append(f"undefined variable {ref}")
    return i, problems


def all_panels(panels):
    """Panels with the panels of collapsed rows, which Grafana nests inside the row."""
    for panel in panels:
        yield panel
        yield from all_panels(panel.get("panels", []))


def variable_query(variable):
    query = variable.get("query", "")
    return query.get("query", "") if isinstance(query, dict) else query


def check_dashboard(dashboard):
    """Returns the problems found in a parsed dashboard (an empty list when it is fine)."""
    problems = []
    if not isinstance(dashboard, dict):
        return ["the dashboard is not a JSON object"]
    if dashboard.get("uid") != DASHBOARD_UID:
        problems.append(f"uid is {dashboard.get('uid')!r}, want {DASHBOARD_UID!r}")
    if not isinstance(dashboard.get("schemaVersion"), int):
        problems.append("schemaVersion is missing")
    if dashboard.get("id") is not None:
        problems.append("id must be null so that Grafana assigns its own")

    # The datasource variable, and queries that use it.
    variables = {v.get("name"): v for v in dashboard.get("templating", {}).get("list", [])}
    ds = variables.get("datasource")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("no templating variable datasource of type datasource (prometheus)")
    for name in ("job", "driver"):
        if name not in variables:
            problems.append(f"no templating variable {name}")
    if variables.get("driver") and not (variables["driver"].get("multi")
                                        and variables["driver"].get("includeAll")):
        problems.append("variable driver must allow several values and All")
    for name, variable in variables.items():
        if variable.get("type") != "query":
            continue
        if not uses_datasource_variable(variable.get("datasource")):
            problems.append(f"variable {name} does not query ${{datasource}}")
        query = variable_query(variable)
        m = re.fullmatch(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query)
        if not m:
            problems.append(f"variable {name}: expected label_values(selector, label), got {query!r}")
            continue
        # A variable cannot filter on itself: the job variable lists jobs, the driver one drivers.
        others = set(variables) - {name}
        for p in check_expr(m.group(1), others, require_job=(name != "job"),
                            require_driver=False, legend="{{" + m.group(2) + "}}"):
            problems.append(f"variable {name}: {p}")

    # Panels: ids, grid, datasource, unit and every query.
    ids = set()
    cells = {}
    for panel in all_panels(dashboard.get("panels", [])):
        pid = panel.get("id")
        where = f"panel {pid} {panel.get('title')!r}"
        if not isinstance(pid, int):
            problems.append(f"{where}: id is not an integer")
        elif pid in ids:
            problems.append(f"{where}: id is used twice")
        ids.add(pid)
        problems += [f"{where}: {p}" for p in check_grid(panel.get("gridPos"), pid, cells)]
        if panel.get("type") == "row":
            if panel.get("targets"):
                problems.append(f"{where}: a row has queries")
            continue
        if not uses_datasource_variable(panel.get("datasource")):
            problems.append(f"{where}: datasource is not ${{datasource}}")
        if not panel.get("fieldConfig", {}).get("defaults", {}).get("unit"):
            problems.append(f"{where}: no unit")
        targets = panel.get("targets") or []
        if not targets:
            problems.append(f"{where}: no queries")
        ref_ids = [t.get("refId") for t in targets]
        if len(set(ref_ids)) != len(ref_ids):
            problems.append(f"{where}: refIds are not unique")
        for target in targets:
            if "datasource" in target and not uses_datasource_variable(target["datasource"]):
                problems.append(f"{where} query {target.get('refId')}: datasource is not "
                                "${datasource}")
            expr = target.get("expr", "")
            if not expr.strip():
                problems.append(f"{where} query {target.get('refId')}: no expression")
                continue
            for p in check_expr(expr, set(variables), legend=target.get("legendFormat", "")):
                problems.append(f"{where} query {target.get('refId')}: {p}")
    if not ids:
        problems.append("no panels")
    return problems


def uses_datasource_variable(datasource):
    if isinstance(datasource, dict):
        return datasource.get("uid") == "${datasource}" and datasource.get("type") == "prometheus"
    return datasource == "${datasource}"


def check_grid(grid, pid, cells):
    """Checks one gridPos and marks its cells as taken (Grafana's grid is 24 columns wide)."""
    if not isinstance(grid, dict) or not all(isinstance(grid.get(k), int) for k in "hwxy"):
        return ["gridPos needs integer h, w, x and y"]
    h, w, x, y = grid["h"], grid["w"], grid["x"], grid["y"]
    if h <= 0 or w <= 0 or x < 0 or y < 0 or x + w > 24:
        return [f"gridPos {grid} is outside the 24-column grid"]
    for cell in ((cx, cy) for cx in range(x, x + w) for cy in range(y, y + h)):
        if cell in cells:
            return [f"gridPos overlaps panel {cells[cell]}"]
        cells[cell] = pid
    return []


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} DASHBOARD.json", file=sys.stderr)
        return 2
    try:
        with open(argv[1], encoding="utf-8") as f:
            dashboard = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{argv[1]}: {e}", file=sys.stderr)
        return 1
    problems = check_dashboard(dashboard)
    for p in problems:
        print(f"{argv[1]}: {p}", file=sys.stderr)
    if problems:
        return 1
    panels = list(all_panels(dashboard["panels"]))
    queries = sum(len(p.get("targets", [])) for p in panels)
    print(f"{argv[1]}: {len(panels)} panels, {queries} queries: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
