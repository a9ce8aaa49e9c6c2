"""The web playground of `sandlot serve` in a real headless browser: Debian's
chromium, driven over WebDriver by Selenium (from PyPI). tests/serve.rs runs it;
tests/run.sh installs both.

    playground_browser.py http://127.0.0.1:PORT/ [TOKEN | --tools]

Without TOKEN (a server without tokens): loads the page, runs Python that prints and
plots, and checks that the text and the image appear; runs again in the same session
and checks the variable is still there. With TOKEN (a server that needs it): the page
first says, as an error, that it cannot list the languages; once the token is entered
the list fills in without a reload, and code indented with Tab runs. With --tools (a
server given mcp-server-time as an upstream): code that calls its tool lists each call
while it still runs, a refused one with its reason. Prints one line per check and exits
non-zero at the first that fails.
"""

import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

from checks import check


def main():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]:
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        browser.get(sys.argv[1])
        wait = WebDriverWait(browser, 90)
        if len(sys.argv) > 2 and sys.argv[2] == "--tools":
            with_tools(browser, wait)
            return
        if len(sys.argv) > 2:
            with_a_token(browser, wait, sys.argv[2])
            return
        code = run_python_on_wasm(
            browser,
            wait,
            "import matplotlib.pyplot as plt\n"
            "kept = 'from the first run'\n"
            "print('hello from the browser')\n"
            "plt.plot([1, 2, 3], [3, 1, 2])\n"
            "plt.show()\n",
        )
        wait.until(lambda b: b.find_element(By.ID, "status").text.startswith(("exit", "error")))
        status = browser.find_element(By.ID, "status").text
        check("the run ends well", status.startswith("exit 0"), status)
        stdout = browser.find_element(By.ID, "stdout").text
        check("the text is shown", "hello from the browser" in stdout, stdout)
        images = browser.find_elements(By.CSS_SELECTOR, "#plots img")
        check("one plot is shown", len(images) == 1, len(images))
        source = images[0].get_attribute("src")
        check("the plot is a PNG", source.startswith("data:image/png;base64,"), source[:40])
        width = browser.execute_script("return arguments[0].naturalWidth", images[0])
        check("the browser decoded the image", width > 100, width)

        code.clear()
        code.send_keys("print(kept)\n")
        browser.find_element(By.ID, "run").click()
        wait.until(lambda b: "from the first run" in b.find_element(By.ID, "stdout").text
                   or b.find_element(By.ID, "status").text.startswith("error"))
        check("the session kept the variable",
              "from the first run" in browser.find_element(By.ID, "stdout").text,
              browser.find_element(By.ID, "status").text)
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        check("no error in the browser's console", not errors, errors)
    finally:
        browser.quit()


def run_python_on_wasm(browser, wait, text):
    """Once the page lists the languages, types `text` as Python for the wasm backend
    and runs it; gives the editor."""
    wait.until(lambda b: len(Select(b.find_element(By.ID, "language")).options) > 1)
    check("the page lists the languages", True)
    Select(browser.find_element(By.ID, "language")).select_by_value("python")
    Select(browser.find_element(By.ID, "backend")).select_by_value("wasm")
    code = browser.find_element(By.ID, "code")
    code.clear()
    code.send_keys(text)
    browser.find_element(By.ID, "run").click()
    return code


def with_tools(browser, wait):
    # Typed without indentation: the editor keeps the lines as they come.
    run_python_on_wasm(
        browser,
        wait,
        "import time\n"
        "import sandlot_tools as t\n"
        "print(t.time_get_current_time(timezone='UTC')['timezone'])\n"
        "try: t.time_get_current_time(timezone=7)\n"
        "except t.ToolError as e: print('refused', type(e).__name__)\n"
        "end = time.time() + 6\n"
        "while time.time() < end: pass\n"
        "print('done')\n",
    )
    calls = lambda b: b.find_elements(By.CSS_SELECTOR, "#tools li")
    wait.until(lambda b: len(calls(b)) == 2)
    status = browser.find_element(By.ID, "status").text
    check("the calls are listed while the run goes on", status.startswith("running"), status)
    first, second = [item.text for item in calls(browser)]
    check("the call that worked", first.startswith("time_get_current_time · ok · "), first)
    check("a refused call says why",
          second.startswith("time_get_current_time · invalid_arguments · ")
          and calls(browser)[1].get_attribute("class") == "failed", second)
    wait.until(lambda b: b.find_element(By.ID, "status").text.startswith(("exit", "error")))
    status = browser.find_element(By.ID, "status").text
    stdout = browser.find_element(By.ID, "stdout").text
    check("the run ends well", status.startswith("exit 0") and "refused ToolArgumentError" in stdout
          and "done" in stdout, status + " | " + stdout)
    check("the list is the result's", len(calls(browser)) == 2
          and browser.find_element(By.ID, "tools-title").text == "tool calls (2)",
          [item.text for item in calls(browser)])
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    check("no error in the browser's console", not errors, errors)


def with_a_token(browser, wait, token):
    status = browser.find_element(By.ID, "status")
    wait.until(lambda b: "cannot list" in status.text)
    check("without the token the page says it cannot list the languages", True, status.text)
    color = browser.execute_script("return getComputedStyle(arguments[0]).color", status)
    check("and shows it as an error", status.get_attribute("class") == "error"
          and color not in ("rgb(136, 136, 136)", "rgb(34, 34, 34)"), color)
    browser.find_element(By.ID, "run").click()
    check("a run without a language says why", "no language" in status.text, status.text)

    field = browser.find_element(By.ID, "token")
    field.send_keys(token)
    field.send_keys(Keys.TAB)  # leaving the field commits it
    wait.until(lambda b: len(Select(b.find_element(By.ID, "language")).options) > 1)
    check("the token fills in the languages without a reload", True)
    check("and the page is ready again", status.get_attribute("class") == "muted", status.text)

    Select(browser.find_element(By.ID, "backend")).select_by_value("wasm")
    code = browser.find_element(By.ID, "code")
    code.clear()
    code.send_keys("for i in range(2):\n", Keys.TAB, "print('indented', i)\n")
    typed = code.get_attribute("value")
    check("Tab indents in the editor", "\n    print('indented', i)" in typed, repr(typed))
    check("and keeps the focus there",
          browser.switch_to.active_element == code, browser.switch_to.active_element.tag_name)
    browser.find_element(By.ID, "run").click()
    wait.until(lambda b: b.find_element(By.ID, "status").text.startswith(("exit", "error")))
    stdout = browser.find_element(By.ID, "stdout").text
    check("the indented code runs", "indented 0\nindented 1" in stdout, stdout + status.text)
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"
              and "401" not in e["message"]]
    check("no other error in the browser's console", not errors, errors)


main()
