"""Pages of the task list: one page's tasks, whether more follow, and the
cursor that reads them."""

from __future__ import annotations

from typing import Any, AsyncIterator, Awaitable, Callable, Generator, Iterator, List, Optional

from ._base import Response
from ._models import Task


class _Page:
    """What both kinds of page read from a list answer."""

    def __init__(self, data: Any, response: Response) -> None:
        self.tasks: List[Task] = [Task.from_dict(t)._with_response(response) for t in data.get("tasks", [])]
        self.has_more: bool = bool(data.get("has_more")) and len(self.tasks) > 0
        self.starting_after: Optional[str] = self.tasks[-1].id if self.has_more else None
        self.response = response

    def __repr__(self) -> str:
        return f"{type(self).__name__}(tasks={len(self.tasks)}, has_more={self.has_more}, starting_after={self.starting_after!r})"


class TaskPage(_Page):
    """One page of the account's tasks, newest first. ``tasks`` are this
    page's; ``has_more`` says whether older ones follow, and
    ``starting_after`` is the cursor that reads them (the last task's id;
    None when none follow). Iterating the page yields its tasks, then the
    following pages' as it reads them."""

    def __init__(
        self,
        data: Any,
        response: Response,
        fetch: Callable[[str], "TaskPage"],
    ) -> None:
        super().__init__(data, response)
        self._fetch = fetch

    def next_page(self) -> Optional["TaskPage"]:
        """The next page, or None when this one is the last."""
        if self.starting_after is None:
            return None
        return self._fetch(self.starting_after)

    def __iter__(self) -> Iterator[Task]:
        page: Optional[TaskPage] = self
        while page is not None:
            yield from page.tasks
            page = page.next_page()



class AsyncTaskPage(_Page):
    """TaskPage for the asyncio client: ``await page.next_page()``, and
    ``async for`` over its tasks and the following pages'."""

    def __init__(
        self,
        data: Any,
        response: Response,
        fetch: Callable[[str], Awaitable["AsyncTaskPage"]],
    ) -> None:
        super().__init__(data, response)
        self._fetch = fetch

    async def next_page(self) -> Optional["AsyncTaskPage"]:
        """The next page, or None when this one is the last."""
        if self.starting_after is None:
            return None
        return await self._fetch(self.starting_after)

    async def __aiter__(self) -> AsyncIterator[Task]:
        page: Optional[AsyncTaskPage] = self
        while page is not None:
            for t in page.tasks:
                yield t
            page = await page.next_page()



class AsyncTaskPager:
    """What AsyncTasks.list returns: awaited, the first page; iterated with
    ``async for``, every task of every page."""

    def __init__(self, first: Callable[[], Awaitable[AsyncTaskPage]]) -> None:
        self._first = first

    def __await__(self) -> Generator[Any, None, AsyncTaskPage]:
        return self._first().__await__()

    async def __aiter__(self) -> AsyncIterator[Task]:
        page = await self._first()
        async for t in page:
            yield t
