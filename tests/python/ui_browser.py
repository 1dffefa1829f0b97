"""Drives Ferry's management web UI in headless Chromium through selenium.

The caller starts chromedriver (and owns its process) and passes its URL; this script opens a
session, does its steps with bounded waits, and always ends the session. On a failure it
saves a screenshot and names its path in the error.

    ui_browser.py --webdriver URL --ui URL --user U --password P --artifacts DIR check \
        --queue NAME --depth N --payload TEXT --connection NAME \
        --kafka-topic T --kafka-group G --kafka-produced N --kafka-lag L \
        --route R --dead-letter TEXT
        wrong password shows the API's reason; log in; the overview counts the queue; the
        queue's row shows depth N; the queue page gets a message with TEXT; the Kafka page
        shows topic T's partition 0 with offsets 0 to N and group G with total lag L; the
        Routes page shows route R running with one dead letter, whose page shows it with
        TEXT, replays it and then shows it delivered; closing the connection whose client
        named itself NAME from the Connections page
    ui_browser.py ... screenshots --queue NAME --out DIR
        a PNG of each main page (overview, queues, the queue with a message got, exchanges,
        connections) in DIR, for docs/ui/
"""

import argparse
import os
import sys
import time

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
    shots = commands.add_parser("screenshots")
    shots.add_argument("--queue", required=True)
    shots.add_argument("--route", required=True)
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
        """The text of `column` (a header title) in the row named `name`."""
        headers = [th.text.strip() for th in self.driver.find_elements(By.CSS_SELECTOR, "#view thead th")]
        index = headers.index(column)
        return self.row(name).find_elements(By.CSS_SELECTOR, "td")[index].text.strip()

    def get_message(self, ackmode="ack_requeue_true"):
        Select(self.visible("#get-ackmode")).select_by_value(ackmode)
        self.driver.find_element(By.ID, "get-submit").click()
        return self.visible("#get-output .message .payload").text

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

    ui.nav("queues")
    ui.until(
        f"queue '{args.queue}' showing {args.depth} ready",
        lambda d: ui.cell(args.queue, "Ready") == f"{args.depth:,}" and ui.cell(args.queue, "Total") == f"{args.depth:,}",
    )
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

    ui.nav("connections")

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


def screenshots(ui, args):
    os.makedirs(args.out, exist_ok=True)
    # Tall enough for a queue page with a message got.
    ui.driver.set_window_size(1280, 1200)
    ui.driver.get(ui.url + "/")
    ui.shot(os.path.join(args.out, "login.png"))
    ui.log_in(args.user, args.password)
    ui.visible("#chart-rates svg path.line")
    # Two samples at least, so the rate charts draw lines.
    time.sleep(12)
    ui.shot(os.path.join(args.out, "overview.png"))
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
    ui.nav("routes")
    ui.row(args.route)
    time.sleep(6)
    ui.shot(os.path.join(args.out, "routes.png"))
    ui.row(args.route).find_element(By.CSS_SELECTOR, "a").click()
    ui.visible(".destination .message")
    ui.shot(os.path.join(args.out, "route.png"))


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
