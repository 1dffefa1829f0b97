"""Drives Ferry's management web UI in headless Chromium through selenium.

The caller starts chromedriver (and owns its process) and passes its URL; this script opens a
session, does its steps with bounded waits, and always ends the session. On a failure it
saves a screenshot and names its path in the error.

    ui_browser.py --webdriver URL --ui URL --user U --password P --artifacts DIR check \
        --queue NAME --depth N --payload TEXT --connection NAME \
        --kafka-topic T --kafka-group G --kafka-produced N --kafka-lag L \
        --route R --dead-letter TEXT --create-topic T2 --delete-topic T3 \
        --consumed-queue Q --consumer TAG --publish TEXT --delete-queue Q2 \
        --records-topic T4 --record-key K --record-value JSON --first-record-ms MS \
        --kafka-client ID --last-topic T5 --last-queue Q3 \
        --share-group S --share-topic T6 --share-start N2 --share-archived A --share-lag L2
        wrong password shows the API's reason; log in; the overview counts the queue and
        shows the node's descriptors, alarms and the Kafka front's topics and lag as
        /api/nodes and /api/ferry/kafka/... give them; the queue's row shows depth N; the Queues page turns to its second page (Q3 the last) and back by the filter; the
        queue page gets a message with TEXT; the Kafka page shows topic T's partition 0 with
        offsets 0 to N and group G with total lag L, and its topics 25 to a page, T5 (the
        last by name) on the second; it creates topic T2 (3 partitions,
        retention.ms 60000) whose page changes retention.ms to 120000, and creates and then
        deletes T3; T4's record browser shows its first record (offset 0, key K, header
        trace: abc, value JSON as text, as indented JSON and as hex) and its second, whose
        value is not UTF-8, and from the time MS + 1 starts at the second; group G's page previews a reset to the earliest offsets (nothing changes)
        and then resets them; share group S (on T6's partition 0) is listed with A
        archived records and lag L2, and its page shows the partition's start offset N2,
        nothing in flight or waiting, A archived, lag L2 and no members; the Routes page
        shows route R running with one dead letter, whose page shows it with TEXT, replays it and then shows it delivered; queue Q's
        page shows consumer TAG and its binding, and publishes TEXT to it; queue Q2's page
        deletes it; every page fits a 700 px window; the Connections page lists the Kafka
        client whose client id is ID on the PLAINTEXT listener and closes its connection;
        closing the connection whose client named itself NAME from the Connections page
    ui_browser.py ... screenshots --queue NAME --out DIR
        a PNG of each main page (overview, queues, the queue with a message got, exchanges,
        connections, Kafka, a topic with records browsed, a group with a reset previewed,
        routes, a route) and of the overview in a 700 px window in DIR, for docs/ui/
"""

import argparse
import base64
import json
import os
import sys
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait

# Longest wait for any one thing to appear; the UI refreshes every 5 s.
WAIT_S = 20


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--webdriver", required=True, help="chromedriver's URL")
    parser.add_argument("--ui", required=True, help="the UI's URL (Ferry's management listener)")
    parser.add_argument("--user", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--artifacts", required=True, help="where a failure's screenshot goes")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check")
    check.add_argument("--queue", required=True)
    check.add_argument("--depth", type=int, required=True)
    check.add_argument("--payload", required=True)
    check.add_argument("--connection", required=True)
    check.add_argument("--kafka-topic", required=True)
    check.add_argument("--kafka-group", required=True)
    check.add_argument("--kafka-produced", type=int, required=True)
    check.add_argument("--kafka-lag", type=int, required=True)
    check.add_argument("--route", required=True)
    check.add_argument("--dead-letter", required=True)
    check.add_argument("--create-topic", required=True)
    check.add_argument("--delete-topic", required=True)
    check.add_argument("--consumed-queue", required=True)
    check.add_argument("--consumer", required=True)
    check.add_argument("--publish", required=True)
    check.add_argument("--delete-queue", required=True)
    check.add_argument("--records-topic", required=True)
    check.add_argument("--record-key", required=True)
    check.add_argument("--record-value", required=True)
    check.add_argument("--first-record-ms", type=int, required=True)
    check.add_argument("--kafka-client", required=True)
    check.add_argument("--share-group", required=True)
    check.add_argument("--share-topic", required=True)
    check.add_argument("--share-start", type=int, required=True)
    check.add_argument("--share-archived", type=int, required=True)
    check.add_argument("--share-lag", type=int, required=True)
    check.add_argument("--last-topic", required=True)
    check.add_argument("--last-queue", required=True)
    shots = commands.add_parser("screenshots")
    shots.add_argument("--queue", required=True)
    shots.add_argument("--route", required=True)
    shots.add_argument("--kafka-topic", required=True)
    shots.add_argument("--kafka-group", required=True)
    shots.add_argument("--out", required=True)
    return parser.parse_args()


def browser(webdriver_url):
    options = webdriver.ChromeOptions()
    for argument in (
        "--headless=new",
        # Root in a container has no user namespace for Chromium's sandbox.
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,860",
        "--no-first-run",
        "--disable-background-networking",
    ):
        options.add_argument(argument)
    return webdriver.Remote(command_executor=webdriver_url, options=options)


class Ui:
    """The UI in one browser session, with bounded waits on what it shows."""

    def __init__(self, driver, url):
        self.driver = driver
        self.url = url.rstrip("/")
        # A page re-renders its table on every refresh: a row read as it is replaced is
        # stale, which means "look again", not a failure.
        self.wait = WebDriverWait(driver, WAIT_S, ignored_exceptions=[StaleElementReferenceException])

    def until(self, what, condition):
        try:
            return self.wait.until(condition)
        except Exception as e:
            raise AssertionError(f"{what} within {WAIT_S} s") from e

    def visible(self, css):
        return self.until(f"'{css}' visible", EC.visibility_of_element_located((By.CSS_SELECTOR, css)))

    def text_is(self, css, expected):
        def holds(driver):
            found = driver.find_elements(By.CSS_SELECTOR, css)
            return found and found[0].text.strip() == expected and found[0]

        return self.until(f"'{css}' showing '{expected}'", holds)

    def log_in(self, user, password):
        self.visible("#login-user").clear()
        self.driver.find_element(By.ID, "login-user").send_keys(user)
        self.driver.find_element(By.ID, "login-password").send_keys(password)
        self.driver.find_element(By.ID, "login-submit").click()

    def open(self, *route):
        self.driver.get(self.url + "/#/" + "/".join(route))

    def nav(self, page):
        self.visible(f"nav a[data-page='{page}']").click()
        self.until(f"page '{page}' shown", lambda d: d.find_element(By.ID, "view").get_attribute("data-page") == page)

    def row(self, name):
        rows = f"#view tbody tr"

        def found(driver):
            for row in driver.find_elements(By.CSS_SELECTOR, rows):
                if row.get_attribute("data-name") == name:
                    return row
            return False

        return self.until(f"a row named '{name}'", found)

    def cell(self, name, column):
        """The text of `column` (a header title) in the row named `name`, or None while the
        table is still being drawn (its header or the row's cells not there yet) — inside
        `until` that means "look again", where an exception would end the wait at once."""
        headers = [th.text.strip() for th in self.driver.find_elements(By.CSS_SELECTOR, "#view thead th")]
        if column not in headers:
            return None
        cells = self.row(name).find_elements(By.CSS_SELECTOR, "td")
        index = headers.index(column)
        return cells[index].text.strip() if index < len(cells) else None

    def get_message(self, ackmode="ack_requeue_true"):
        Select(self.visible("#get-ackmode")).select_by_value(ackmode)
        self.driver.find_element(By.ID, "get-submit").click()
        return self.visible("#get-output .message .payload").text

    def api(self, path, user, password):
        """GET `path` of the management API, as a client independent of the browser."""
        request = urllib.request.Request(self.url + path)
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=WAIT_S) as answer:
            return json.load(answer)

    def click_twice(self, css):
        """Clicks a button that asks for a second click (`confirmButton` in core.js)."""
        self.visible(css).click()
        self.until(f"'{css}' asking for a second click", lambda d: "again" in d.find_element(By.CSS_SELECTOR, css).text)
        self.driver.find_element(By.CSS_SELECTOR, css).click()

    def fits(self, what):
        """Fails when the page is wider than the window (a horizontal scroll bar)."""
        wide, window = self.driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        assert wide <= window, f"{what} is {wide} px wide in a {window} px window"

    def shot(self, path):
        time.sleep(0.3)  # let the last redraw paint
        self.driver.save_screenshot(path)


def check(ui, args):
    ui.driver.get(ui.url + "/")
    ui.log_in(args.user, args.password + "-wrong")
    ui.text_is("#login-error", "Login failed")

    ui.log_in(args.user, args.password)
    ui.visible("#app")
    ui.until("the overview counting at least one queue", lambda d: int(d.find_element(By.CSS_SELECTOR, "[data-total=queues] strong").text or 0) >= 1)
    ui.visible("#chart-rates svg")
    check_overview(ui, args)

    ui.nav("queues")
    ui.until(
        f"queue '{args.queue}' showing {args.depth} ready",
        lambda d: ui.cell(args.queue, "Ready") == f"{args.depth:,}" and ui.cell(args.queue, "Total") == f"{args.depth:,}",
    )
    turn_a_page_of_queues(ui, args)
    ui.row(args.queue).find_element(By.CSS_SELECTOR, "a").click()
    ui.text_is("#queue-name", args.queue)
    ui.text_is("#queue-ready", f"{args.depth:,}")
    got = ui.get_message()
    assert got == args.payload, f"the queue page got {got!r}, expected {args.payload!r}"

    ui.nav("kafka")
    offsets = f"0: 0–{args.kafka_produced:,} (stable {args.kafka_produced:,})"
    ui.until(
        f"topic '{args.kafka_topic}' showing partition 0 as '{offsets}'",
        lambda d: ui.row(args.kafka_topic).find_element(By.CSS_SELECTOR, ".partition[data-partition='0']").text.strip() == offsets,
    )
    ui.until(
        f"group '{args.kafka_group}' showing total lag {args.kafka_lag}",
        lambda d: ui.row(args.kafka_group).find_element(By.CSS_SELECTOR, ".total-lag").text.strip() == f"{args.kafka_lag:,}",
    )

    turn_a_page_of_topics(ui, args)
    create_change_and_delete_topics(ui, args)
    browse_records(ui, args)
    reset_group(ui, args)
    share_group(ui, args)

    ui.nav("routes")
    ui.until(
        f"route '{args.route}' running with one dead letter",
        lambda d: ui.row(args.route).get_attribute("data-state") == "running" and ui.cell(args.route, "Dead letters") == "1",
    )
    ui.row(args.route).find_element(By.CSS_SELECTOR, "a").click()
    ui.text_is("#route-name", args.route)
    destination = ".destination[data-index='0']"
    ui.text_is(f"{destination} .message .payload", args.dead_letter)
    ui.until(
        "the dead letter showing the destination's last refusal",
        lambda d: "unroutable: no queue is bound" in d.find_element(By.CSS_SELECTOR, f"{destination} .message").text,
    )
    ui.visible(f"{destination} button[data-action='replay']").click()
    ui.text_is(f"{destination} .result", "Replayed 1.")
    ui.text_is(f"{destination} .dead-letters", "0")
    ui.text_is(f"{destination} .delivered", "1")

    consumers_bindings_publish_and_delete(ui, args)
    narrow_window(ui, args)

    ui.nav("connections")
    kafka_client = f"#kafka-clients tr[data-kafka-client='{args.kafka_client}']"
    ui.until(f"Kafka client '{args.kafka_client}' listed", lambda d: d.find_elements(By.CSS_SELECTOR, kafka_client))
    cells = [td.text.strip() for td in ui.driver.find_elements(By.CSS_SELECTOR, f"{kafka_client} td")]
    assert cells[2:4] == ["PLAINTEXT", "no"], cells
    # Closing it: its row (by connection id) goes; the client may connect again, as a new one.
    kafka_id = ui.driver.find_element(By.CSS_SELECTOR, kafka_client).get_attribute("data-kafka-id")
    kafka_row = f"#kafka-clients tr[data-kafka-id='{kafka_id}']"
    ui.driver.find_element(By.CSS_SELECTOR, f"{kafka_row} button.close").click()
    ui.until("the Kafka close button asking for a second click", lambda d: "again" in d.find_element(By.CSS_SELECTOR, f"{kafka_row} button.close").text)
    ui.driver.find_element(By.CSS_SELECTOR, f"{kafka_row} button.close").click()
    ui.until(f"Kafka connection {kafka_id} gone from the page", lambda d: not d.find_elements(By.CSS_SELECTOR, kafka_row))

    def connection_row(driver):
        for row in driver.find_elements(By.CSS_SELECTOR, "#view tbody tr"):
            if args.connection in row.text:
                return row
        return False

    row = ui.until(f"a connection named '{args.connection}'", connection_row)
    name = row.get_attribute("data-name")
    row.find_element(By.CSS_SELECTOR, "button.close").click()
    ui.until("the close button asking for a second click", lambda d: "again" in ui.row(name).find_element(By.CSS_SELECTOR, "button.close").text)
    ui.row(name).find_element(By.CSS_SELECTOR, "button.close").click()
    ui.until(
        f"connection '{name}' gone from the page",
        lambda d: all(r.get_attribute("data-name") != name for r in d.find_elements(By.CSS_SELECTOR, "#view tbody tr")),
    )
    print(f"closed {name}")


def check_overview(ui, args):
    """The overview's node and Kafka figures are those the API gives."""
    node = ui.api("/api/nodes", args.user, args.password)[0]
    # Descriptors in use change between two reads; their limit does not.
    ui.until(
        f"the overview showing the descriptor limit {node['fd_total']:,}",
        lambda d: d.find_element(By.CSS_SELECTOR, "[data-node=fd_used]").text.endswith(f" of {node['fd_total']:,}"),
    )
    ui.until(
        "the overview showing the memory in use",
        lambda d: int(d.find_element(By.CSS_SELECTOR, "[data-node=mem_used]").get_attribute("data-value")) > 0,
    )
    ui.text_is("#alarm-memory", "raised: publishers are held back" if node["mem_alarm"] else "none")
    ui.text_is("#alarm-disk", "raised: publishers are held back" if node["disk_free_alarm"] else "none")
    topics = ui.api("/api/ferry/kafka/topics", args.user, args.password)
    ui.text_is("[data-total=kafka_topics] strong", f"{len(topics):,}")
    ui.text_is("[data-total=kafka_lag] strong", f"{args.kafka_lag:,}")
    ui.visible("#chart-kafka svg")


def turn_a_page_of_queues(ui, args):
    """The Queues page lists 50 queues to a page; Next shows the rest, Previous goes back, and
    the filter starts again at the first page of what matches."""
    total = len(ui.api("/api/queues", args.user, args.password))
    assert total > 50, f"only {total} queues: the list fits on one page"
    last = f"#view tr[data-name='{args.last_queue}']"
    ui.text_is("#view .pager .page-of", f"1–50 of {total}")
    assert not ui.driver.find_elements(By.CSS_SELECTOR, last), "the last queue on the first page"
    ui.visible("#view .pager button[data-action='next']").click()
    ui.text_is("#view .pager .page-of", f"51–{total} of {total}")
    ui.until(f"queue '{args.last_queue}' on the second page", lambda d: d.find_elements(By.CSS_SELECTOR, last))
    ui.visible("#queue-filter").send_keys(args.last_queue)
    ui.until("only the filtered queue, on one page", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#view tbody tr")) == 1 and not d.find_elements(By.CSS_SELECTOR, "#view .pager"))
    ui.visible("#queue-filter").clear()
    ui.driver.execute_script("document.getElementById('queue-filter').dispatchEvent(new Event('input'))")
    ui.text_is("#view .pager .page-of", f"1–50 of {total}")


def turn_a_page_of_topics(ui, args):
    """The Kafka page lists 25 topics to a page; Next shows the rest, Previous goes back."""
    total = len(ui.api("/api/ferry/kafka/topics", args.user, args.password))
    assert total > 25, f"only {total} topics: the list fits on one page"
    ui.text_is("#topics .pager .page-of", f"1–25 of {total}")
    assert not ui.driver.find_elements(By.CSS_SELECTOR, f"#topics tr[data-name='{args.last_topic}']"), "the last topic on the first page"
    assert len(ui.driver.find_elements(By.CSS_SELECTOR, "#topics tbody tr")) == 25
    ui.visible("#topics .pager button[data-action='next']").click()
    ui.text_is("#topics .pager .page-of", f"26–{total} of {total}")
    ui.until(f"topic '{args.last_topic}' on the second page", lambda d: d.find_elements(By.CSS_SELECTOR, f"#topics tr[data-name='{args.last_topic}']"))
    # The page shown stays across a refresh.
    time.sleep(6)
    ui.text_is("#topics .pager .page-of", f"26–{total} of {total}")
    ui.visible("#topics .pager button[data-action='previous']").click()
    ui.text_is("#topics .pager .page-of", f"1–25 of {total}")


def create_change_and_delete_topics(ui, args):
    """Creates a topic with settings, changes one, creates another and deletes it."""
    ui.nav("kafka")
    ui.visible("#topic-name").send_keys(args.create_topic)
    ui.driver.find_element(By.ID, "topic-partitions").send_keys("3")
    ui.driver.find_element(By.ID, "topic-retention").send_keys("60000")
    ui.driver.find_element(By.ID, "topic-create").click()
    ui.text_is("#topic-create-result", f"Created {args.create_topic}.")
    ui.until(f"topic '{args.create_topic}' listed with 3 partitions", lambda d: ui.cell(args.create_topic, "Partitions") == "3")
    ui.row(args.create_topic).find_element(By.CSS_SELECTOR, "a").click()
    ui.text_is("#topic-title", args.create_topic)
    ui.until("three partition rows", lambda d: len(d.find_elements(By.CSS_SELECTOR, "#view tbody tr[data-partition]")) == 3)
    retention = ui.visible("#topic-settings input[data-setting='retention.ms']")
    assert retention.get_attribute("value") == "60000", retention.get_attribute("value")
    retention.clear()
    retention.send_keys("120000")
    ui.driver.find_element(By.ID, "settings-save").click()
    ui.text_is("#settings-result", "Saved retention.ms.")
    ui.until(
        "retention.ms drawn again as 120000",
        lambda d: d.find_element(By.CSS_SELECTOR, "#topic-settings input[data-setting='retention.ms']").get_attribute("value") == "120000",
    )

    ui.nav("kafka")
    ui.visible("#topic-name").send_keys(args.delete_topic)
    ui.driver.find_element(By.ID, "topic-create").click()
    ui.text_is("#topic-create-result", f"Created {args.delete_topic}.")
    ui.open("topic", urllib.parse.quote(args.delete_topic))
    ui.text_is("#topic-title", args.delete_topic)
    ui.visible("#view table")
    ui.click_twice("#topic-delete")
    ui.until("the Kafka page after the deletion", lambda d: d.find_element(By.ID, "view").get_attribute("data-page") == "kafka")
    ui.row(args.create_topic)
    ui.until(
        f"topic '{args.delete_topic}' gone from the page",
        lambda d: all(r.get_attribute("data-name") != args.delete_topic for r in d.find_elements(By.CSS_SELECTOR, "#topics tbody tr")),
    )


def browse_records(ui, args):
    """Reads a partition's records from an offset and from a time, in each format."""
    ui.open("topic", urllib.parse.quote(args.records_topic))
    ui.text_is("#topic-title", args.records_topic)
    ui.until("partition 0 in the browser", lambda d: d.find_elements(By.CSS_SELECTOR, "#browse-partition option[value='0']"))
    Select(ui.driver.find_element(By.ID, "browse-partition")).select_by_value("0")
    ui.driver.find_element(By.ID, "browse-offset").clear()
    ui.driver.find_element(By.ID, "browse-offset").send_keys("0")
    ui.driver.find_element(By.ID, "browse-submit").click()
    first, second = "#browse-output .record[data-offset='0']", "#browse-output .record[data-offset='1']"
    ui.text_is(f"{first} .key", args.record_key)
    ui.text_is(f"{first} .header", "trace: abc")
    ui.text_is(f"{first} .value", args.record_value)
    ui.until(
        "the first record's timestamp",
        lambda d: str(args.first_record_ms) in d.find_element(By.CSS_SELECTOR, first).text,
    )
    assert "not UTF-8" in ui.visible(f"{second} .value").text, ui.visible(f"{second} .value").text
    Select(ui.driver.find_element(By.ID, "browse-format")).select_by_value("json")
    pretty = json.dumps(json.loads(args.record_value), indent=2)
    ui.text_is(f"{first} .value", pretty)
    Select(ui.driver.find_element(By.ID, "browse-format")).select_by_value("hex")
    raw = args.record_value.encode()
    ui.until(
        "the first value as hex",
        lambda d: d.find_element(By.CSS_SELECTOR, f"{first} .value").text.startswith("000000  " + " ".join(f"{b:02x}" for b in raw[:16])),
    )
    ui.text_is(f"{second} .value", "000000  ff 00 7b")

    Select(ui.driver.find_element(By.ID, "browse-from")).select_by_value("timestamp")
    ui.visible("#browse-time").send_keys(str(args.first_record_ms + 1))
    ui.driver.find_element(By.ID, "browse-submit").click()
    ui.until(
        "the look from the time starting at the second record",
        lambda d: [r.get_attribute("data-offset") for r in d.find_elements(By.CSS_SELECTOR, "#browse-output .record")] == ["1"],
    )


def reset_group(ui, args):
    """Previews a reset of the group to the earliest offsets, then resets it."""
    ui.nav("kafka")
    ui.row(args.kafka_group).find_element(By.CSS_SELECTOR, "a").click()
    ui.text_is("#group-title", args.kafka_group)
    ui.text_is("#group-state", "Empty")
    committed = f"#view tbody tr[data-topic='{args.kafka_topic}'][data-partition='0'] .committed"
    before = f"{args.kafka_produced - args.kafka_lag:,}"
    ui.text_is(committed, before)
    assert not ui.driver.find_element(By.ID, "reset-apply").is_enabled(), "Reset offsets is enabled before a preview"
    Select(ui.visible("#reset-to")).select_by_value("earliest")
    ui.driver.find_element(By.ID, "reset-preview").click()
    new_offset = f"#reset-output tr[data-topic='{args.kafka_topic}'][data-partition='0'] .new-offset"
    ui.text_is(new_offset, "0")
    ui.text_is("#reset-result", "Preview: nothing changed yet; Reset offsets writes these.")
    # A dry run changes nothing: after a refresh the committed offset is the same.
    ui.driver.execute_script("window.dispatchEvent(new Event('ferry:refresh'))")
    time.sleep(1)
    ui.text_is(committed, before)
    ui.until("Reset offsets enabled by the preview", lambda d: d.find_element(By.ID, "reset-apply").is_enabled())
    ui.driver.find_element(By.ID, "reset-apply").click()
    partitions = len(ui.api(f"/api/ferry/kafka/topics/{urllib.parse.quote(args.kafka_topic)}", args.user, args.password)["partitions"])
    ui.text_is("#reset-result", f"Reset {partitions} offsets.")
    ui.text_is(committed, "0")
    ui.text_is("#group-lag", f"{args.kafka_produced:,}")


def share_group(ui, args):
    """The Kafka page lists the share group with its totals; its page shows its one
    share-partition's figures and that it has no members."""
    ui.nav("kafka")
    row = f"#share-groups tr[data-name='{args.share_group}']"
    ui.until(
        f"share group '{args.share_group}' listed with {args.share_archived} archived and lag {args.share_lag}",
        lambda d: [d.find_element(By.CSS_SELECTOR, f"{row} {cell}").text.strip() for cell in (".archived", ".total-lag")]
        == [f"{args.share_archived:,}", f"{args.share_lag:,}"],
    )
    ui.visible(f"{row} a").click()
    ui.text_is("#share-group-title", args.share_group)
    ui.text_is("#share-group-state", "Empty")
    partition = f"#view tbody tr[data-topic='{args.share_topic}'][data-partition='0']"
    for cell, value in (("start", args.share_start), ("in-flight", 0), ("waiting", 0), ("archived", args.share_archived), ("lag", args.share_lag)):
        ui.text_is(f"{partition} .{cell}", f"{value:,}")
    ui.text_is("#share-group-lag", f"{args.share_lag:,}")
    ui.text_is("#view .empty", "No members on this instance.")


def consumers_bindings_publish_and_delete(ui, args):
    """A queue's consumers and bindings; a message published to it; a queue deleted."""
    ui.open("queue", "%2F", urllib.parse.quote(args.consumed_queue))
    ui.text_is("#queue-name", args.consumed_queue)
    ui.until(f"consumer '{args.consumer}' listed", lambda d: d.find_elements(By.CSS_SELECTOR, f"#queue-consumers tr[data-name='{args.consumer}']"))
    ui.until(
        "the default exchange's binding listed",
        lambda d: d.find_elements(By.CSS_SELECTOR, f"#queue-bindings tr[data-source=''][data-key='{args.consumed_queue}']"),
    )
    ui.visible("#publish-payload").send_keys(args.publish)
    ui.driver.find_element(By.ID, "publish-headers").send_keys('{"source": "ui"}')
    ui.driver.find_element(By.ID, "publish-submit").click()
    ui.text_is("#publish-result", "Message published.")

    ui.open("queue", "%2F", urllib.parse.quote(args.delete_queue))
    ui.text_is("#queue-name", args.delete_queue)
    ui.visible("#queue-ready")
    ui.click_twice("#queue-delete")
    ui.until("the Queues page after the deletion", lambda d: d.find_element(By.ID, "view").get_attribute("data-page") == "queues")
    ui.row(args.consumed_queue)
    ui.until(
        f"queue '{args.delete_queue}' gone from the page",
        lambda d: all(r.get_attribute("data-name") != args.delete_queue for r in d.find_elements(By.CSS_SELECTOR, "#view tbody tr")),
    )


def narrow_window(ui, args):
    """Every page, at 700 px, is no wider than the window."""
    ui.driver.set_window_size(700, 900)
    try:
        for page in ("overview", "queues", "exchanges", "connections", "kafka", "routes"):
            ui.nav(page)
            ui.visible("#view h1")
            time.sleep(0.5)  # the first refresh's tables
            ui.fits(f"page '{page}'")
        for route, ready in (
            (("queue", "%2F", urllib.parse.quote(args.consumed_queue)), "#queue-ready"),
            (("topic", urllib.parse.quote(args.create_topic)), "#topic-settings"),
            (("group", urllib.parse.quote(args.kafka_group)), "#group-lag"),
            (("share-group", urllib.parse.quote(args.share_group)), "#share-group-lag"),
            (("route", urllib.parse.quote(args.route)), ".destination"),
        ):
            ui.open(*route)
            ui.visible(ready)
            time.sleep(0.5)
            ui.fits(f"page '{'/'.join(route)}'")
    finally:
        ui.driver.set_window_size(1280, 860)


def screenshots(ui, args):
    os.makedirs(args.out, exist_ok=True)
    # Tall enough for a queue page with a message got.
    ui.driver.set_window_size(1280, 1200)
    ui.driver.get(ui.url + "/")
    ui.shot(os.path.join(args.out, "login.png"))
    ui.log_in(args.user, args.password)
    ui.visible("#chart-rates svg path.line")
    ui.driver.set_window_size(1280, 1500)  # the node's card under the charts
    # Two samples at least, so the rate charts draw lines.
    time.sleep(12)
    ui.shot(os.path.join(args.out, "overview.png"))
    ui.driver.set_window_size(1280, 1200)
    ui.nav("queues")
    ui.row(args.queue)
    # Ferry's API computes a queue's rates between two requests: wait for the next refresh.
    time.sleep(6)
    ui.shot(os.path.join(args.out, "queues.png"))
    ui.row(args.queue).find_element(By.CSS_SELECTOR, "a").click()
    ui.get_message()
    ui.shot(os.path.join(args.out, "queue.png"))
    ui.nav("exchanges")
    ui.visible("#view table")
    ui.shot(os.path.join(args.out, "exchanges.png"))
    ui.nav("connections")
    ui.visible("#view table")
    ui.shot(os.path.join(args.out, "connections.png"))
    ui.nav("kafka")
    ui.visible("#view table")
    ui.shot(os.path.join(args.out, "kafka.png"))
    ui.row(args.kafka_topic).find_element(By.CSS_SELECTOR, "a").click()
    ui.visible("#topic-settings")
    # The record browser with the last three records, values as indented JSON.
    ui.until("partition 0 in the browser", lambda d: d.find_elements(By.CSS_SELECTOR, "#browse-partition option[value='0']"))
    Select(ui.driver.find_element(By.ID, "browse-from")).select_by_value("latest")
    limit = ui.driver.find_element(By.ID, "browse-limit")
    limit.clear()
    limit.send_keys("3")
    Select(ui.driver.find_element(By.ID, "browse-format")).select_by_value("json")
    ui.driver.find_element(By.ID, "browse-submit").click()
    ui.visible("#browse-output .record")
    ui.driver.set_window_size(1280, 1700)
    ui.shot(os.path.join(args.out, "topic.png"))
    ui.driver.set_window_size(1280, 1200)
    ui.nav("kafka")
    ui.row(args.kafka_group).find_element(By.CSS_SELECTOR, "a").click()
    ui.visible("#group-lag")
    ui.visible("#reset-preview").click()
    ui.visible("#reset-output table")
    ui.shot(os.path.join(args.out, "group.png"))
    ui.nav("routes")
    ui.row(args.route)
    time.sleep(6)
    ui.shot(os.path.join(args.out, "routes.png"))
    ui.row(args.route).find_element(By.CSS_SELECTOR, "a").click()
    ui.visible(".destination .message")
    ui.shot(os.path.join(args.out, "route.png"))
    # The overview in a narrow window: the header wraps, the cards stack.
    ui.driver.set_window_size(700, 1200)
    ui.nav("overview")
    ui.visible("#node-resources")
    ui.shot(os.path.join(args.out, "narrow.png"))


def main():
    args = parse_args()
    driver = browser(args.webdriver)
    try:
        ui = Ui(driver, args.ui)
        {"check": check, "screenshots": screenshots}[args.command](ui, args)
    except Exception as e:
        os.makedirs(args.artifacts, exist_ok=True)
        path = os.path.join(args.artifacts, "failure.png")
        driver.save_screenshot(path)
        print(f"{type(e).__name__}: {e} (screenshot: {path}; page: {driver.current_url})", file=sys.stderr)
        sys.exit(1)
    finally:
        driver.quit()


if __name__ == "__main__":
    main()
