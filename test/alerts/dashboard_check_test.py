#!/usr/bin/env python3
"""Tests of dashboard_check.py: the shipped dashboard passes, and each kind of mistake the check
exists for (a metric or label typo, a missing variable, a clash on the grid) makes it fail.
Run by meson as the unit test `dashboard_check_selftest`: `dashboard_check_test.py DASHBOARD.json`.
"""

import copy
import json
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dashboard_check  # noqa: E402

DASHBOARD_PATH = None  # set from the command line in main


def load():
    with open(DASHBOARD_PATH, encoding="utf-8") as f:
        return json.load(f)


def panel(dashboard, panel_id):
    return next(p for p in dashboard_check.all_panels(dashboard["panels"]) if p.get("id") == panel_id)


def first_query_panel(dashboard):
    return next(p for p in dashboard["panels"] if p.get("targets"))


class ShippedDashboard(unittest.TestCase):
    def test_passes(self):
        self.assertEqual(dashboard_check.check_dashboard(load()), [])

    def test_covers_every_metric_of_the_contract(self):
        # A panel per metric family: a metric nobody looks at is a gap in the dashboard.
        exprs = " ".join(t["expr"] for p in dashboard_check.all_panels(load()["panels"])
                         for t in p.get("targets", []))
        for name in dashboard_check.METRICS:
            if name in ("controller_runtime_reconcile_errors_total",):
                continue  # the error ratio is drawn from reconcile_total{result="error"}
            self.assertIn(name, exprs)
        for name in dashboard_check.HISTOGRAMS:
            self.assertIn(name + "_bucket", exprs)


class Expressions(unittest.TestCase):
    VARIABLES = {"datasource", "job", "driver"}

    def check(self, expr, legend=""):
        return dashboard_check.check_expr(expr, self.VARIABLES, legend=legend)

    def test_a_correct_expression_passes(self):
        self.assertEqual(self.check(
            'histogram_quantile(0.99, sum by (driver, le) (rate('
            'resourceslice_controller_publish_latency_seconds_bucket{job="$job", '
            'driver=~"$driver"}[$__rate_interval])))', legend="p99 {{driver}}"), [])

    def test_a_misspelt_metric_fails(self):
        problems = self.check('sum(rate(workqueue_add_total{job="$job"}[5m]))')
        self.assertIn("unknown metric workqueue_add_total", problems)

    def test_a_histogram_without_suffix_fails(self):
        problems = self.check('rate(workqueue_work_duration_seconds{job="$job"}[5m])')
        self.assertEqual(len(problems), 1)
        self.assertIn("is a histogram", problems[0])

    def test_bucket_of_a_counter_fails(self):
        problems = self.check('rate(workqueue_adds_total_bucket{job="$job"}[5m])')
        self.assertIn("unknown metric workqueue_adds_total_bucket", problems)

    def test_sum_and_count_of_a_histogram_pass(self):
        self.assertEqual(self.check(
            'rate(rest_client_request_duration_seconds_sum{job="$job"}[5m]) / '
            'rate(rest_client_request_duration_seconds_count{job="$job"}[5m])'), [])

    def test_a_misspelt_function_fails(self):
        problems = self.check('histogram_quantil(0.5, workqueue_depth{job="$job"})')
        self.assertIn("unknown function histogram_quantil()", problems)

    def test_a_query_without_the_job_variable_fails(self):
        problems = self.check('workqueue_depth{job="resourceslice-controller"}')
        self.assertIn('workqueue_depth does not select job="$job"', problems)
        self.assertIn('up does not select job="$job"', self.check("sum(up)"))

    def test_a_driver_metric_without_the_driver_variable_fails(self):
        problems = self.check('sum(resourceslice_controller_pools{job="$job"})')
        self.assertIn('resourceslice_controller_pools does not select driver=~"$driver"', problems)

    def test_a_label_the_metric_lacks_fails(self):
        # rest_client_requests_total has method, its duration histogram has verb.
        problems = self.check('rest_client_requests_total{job="$job", verb="GET"}')
        self.assertIn("rest_client_requests_total has no label verb", problems)
        problems = self.check('sum by (verb) (rate(rest_client_requests_total{job="$job"}[5m]))')
        self.assertIn("label verb is not on any metric of the expression", problems)
        problems = self.check('rate(rest_client_requests_total{job="$job"}[5m])',
                              legend="{{ verb }}")
        self.assertIn("label verb is not on any metric of the expression", problems)

    def test_an_undefined_variable_fails(self):
        problems = self.check('workqueue_depth{job="$job", name="$queue"}')
        self.assertIn("undefined variable $queue", problems)
        problems = self.check('rate(workqueue_adds_total{job="$job"}[$window])')
        self.assertIn("undefined variable $window", problems)

    def test_a_selector_without_a_name_fails(self):
        self.assertTrue(self.check('{job="$job"}'))

    def test_unbalanced_parentheses_fail(self):
        self.assertIn("unbalanced parentheses", self.check('sum(up{job="$job"}'))


class DashboardStructure(unittest.TestCase):
    def assertFindsProblem(self, dashboard, text):
        problems = dashboard_check.check_dashboard(dashboard)
        self.assertTrue(any(text in p for p in problems), f"{text!r} not in {problems}")

    def test_another_uid_fails(self):
        dashboard = load()
        dashboard["uid"] = "abc123"
        self.assertFindsProblem(dashboard, "uid is 'abc123'")

    def test_a_panel_with_a_fixed_datasource_fails(self):
        dashboard = load()
        first_query_panel(dashboard)["datasource"] = {"type": "prometheus", "uid": "P1809F7CD0C75ACF3"}
        self.assertFindsProblem(dashboard, "datasource is not ${datasource}")

    def test_a_query_with_a_fixed_datasource_fails(self):
        dashboard = load()
        first_query_panel(dashboard)["targets"][0]["datasource"] = {"type": "prometheus",
                                                                    "uid": "prometheus"}
        self.assertFindsProblem(dashboard, "query A: datasource is not ${datasource}")

    def test_a_missing_datasource_variable_fails(self):
        dashboard = load()
        dashboard["templating"]["list"] = [v for v in dashboard["templating"]["list"]
                                           if v["name"] != "datasource"]
        self.assertFindsProblem(dashboard, "no templating variable datasource")

    def test_a_driver_variable_without_all_fails(self):
        dashboard = load()
        for v in dashboard["templating"]["list"]:
            if v["name"] == "driver":
                v["includeAll"] = False
        self.assertFindsProblem(dashboard, "variable driver must allow several values and All")

    def test_a_typo_in_a_variable_query_fails(self):
        dashboard = load()
        for v in dashboard["templating"]["list"]:
            if v["name"] == "driver":
                v["query"]["query"] = 'label_values(resourceslice_controller_pool{job="$job"}, driver)'
        self.assertFindsProblem(dashboard, "variable driver: unknown metric resourceslice_controller_pool")

    def test_a_duplicate_panel_id_fails(self):
        dashboard = load()
        dashboard["panels"][2]["id"] = dashboard["panels"][1]["id"]
        self.assertFindsProblem(dashboard, "id is used twice")

    def test_overlapping_panels_fail(self):
        dashboard = load()
        dashboard["panels"][2]["gridPos"] = copy.deepcopy(dashboard["panels"][1]["gridPos"])
        self.assertFindsProblem(dashboard, "gridPos overlaps panel")

    def test_a_panel_off_the_grid_fails(self):
        dashboard = load()
        dashboard["panels"][1]["gridPos"]["x"] = 22
        self.assertFindsProblem(dashboard, "outside the 24-column grid")

    def test_a_panel_without_a_unit_fails(self):
        dashboard = load()
        del first_query_panel(dashboard)["fieldConfig"]["defaults"]["unit"]
        self.assertFindsProblem(dashboard, "no unit")

    def test_panels_inside_a_collapsed_row_are_checked(self):
        dashboard = load()
        inner = copy.deepcopy(panel(dashboard, 72))
        inner["id"] = 999
        inner["targets"][0]["expr"] = 'process_resident_memory_byte{job="$job"}'
        dashboard["panels"].append({"type": "row", "id": 998, "title": "more", "collapsed": True,
                                    "gridPos": {"h": 1, "w": 24, "x": 0, "y": 200},
                                    "panels": [inner]})
        inner["gridPos"] = {"h": 8, "w": 6, "x": 0, "y": 201}
        self.assertFindsProblem(dashboard, "panel 999 'Memory' query A: unknown metric "
                                           "process_resident_memory_byte")


def main():
    global DASHBOARD_PATH
    if len(sys.argv) < 2:
        print(f"usage: {sys.argv[0]} DASHBOARD.json [unittest args]", file=sys.stderr)
        return 2
    DASHBOARD_PATH = sys.argv.pop(1)
    program = unittest.main(exit=False, verbosity=2)
    return 0 if program.result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
