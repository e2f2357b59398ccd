"""The approval tasks page a page at a time (issue 25): 50 rows by default, a
"Next page" link by keyset on (due time, id), and how many tasks wait in all."""

from __future__ import annotations

import re

from app.services.read import task_list

from ..builders import add_reports, decide_report, login


def task_ids(html: str) -> list[str]:
    return re.findall(r'<tr data-task="([^"]+)"', html)


def test_the_tasks_page_pages_by_keyset_and_says_how_many_wait(app, client, world, monkeypatch):
    add_reports(world, 4)
    for index in range(5):
        decide_report(world, index)
    login(client, "reviewer@example.com")
    monkeypatch.setattr(task_list, "TASK_PAGE_SIZE", 2)
    seen, url, pages = [], "/tasks", 0
    while url:
        html = client.get(url).get_data(as_text=True)
        assert "5 tasks waiting in all" in html
        seen += task_ids(html)
        found = re.search(r'<a rel="next" href="([^"]+)"', html)
        url = found.group(1).replace("&amp;", "&") if found else None
        pages += 1
    assert pages == 3
    assert len(seen) == len(set(seen)) == 5  # every open task once, none twice


def test_one_page_of_tasks_has_no_next_link(app, client, world):
    decide_report(world, 0)
    login(client, "reviewer@example.com")
    html = client.get("/tasks").get_data(as_text=True)
    assert len(task_ids(html)) == 1
    assert "1 task waiting in all." in html
    assert 'rel="next"' not in html


def test_a_malformed_cursor_reads_as_the_first_page(app, client, world):
    decide_report(world, 0)
    login(client, "reviewer@example.com")
    response = client.get("/tasks?after=not-a-cursor")
    assert response.status_code == 200
    assert len(task_ids(response.get_data(as_text=True))) == 1
