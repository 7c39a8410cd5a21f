"""``Grid`` of the stbt API: a region cut into equal cells.

farmhand's own code, written from stb-tester's public manual: a menu or an
on-screen keyboard laid out in rows and columns, with a value (``data``)
per cell if wanted, and the conversions between a cell's index, its
position in cells, its region on screen and its data.
"""

import collections
import numbers

from stbt_core._types import Position, Region

__all__ = ["Grid"]


class Grid:
    """``Grid(region, cols=None, rows=None, data=None)``: ``region`` cut into
    ``cols`` x ``rows`` equal cells. ``data`` is a list of rows (a list of
    lists) of values, one per cell; with it ``cols`` and ``rows`` may be
    left out. Cells are numbered row by row from 0."""

    Cell = collections.namedtuple("Cell", "index position region data")

    def __init__(self, region, cols=None, rows=None, data=None):
        if data is not None:
            data = [list(row) for row in data]
            rows = len(data) if rows is None else rows
            cols = (max((len(r) for r in data), default=0)) if cols is None else cols
        if not cols or not rows or cols < 1 or rows < 1:
            raise ValueError("a Grid needs cols and rows (or data), at least 1 each")
        if data is not None and (len(data) > rows or any(len(r) > cols for r in data)):
            raise ValueError("the Grid's data has more rows or columns than rows=%r, cols=%r" % (rows, cols))
        self.region, self.cols, self.rows, self.data = region, int(cols), int(rows), data

    def __repr__(self):
        return "Grid(region=%r, cols=%d, rows=%d)" % (self.region, self.cols, self.rows)

    @property
    def area(self):
        """The number of cells."""
        return self.cols * self.rows

    def __len__(self):
        return self.area

    @property
    def cells(self):
        return [self._cell(i) for i in range(self.area)]

    def __iter__(self):
        return iter(self.cells)

    def _cell(self, index):
        col, row = index % self.cols, index // self.cols
        r = self.region
        x0 = r.x + col * r.width // self.cols
        x1 = r.x + (col + 1) * r.width // self.cols
        y0 = r.y + row * r.height // self.rows
        y1 = r.y + (row + 1) * r.height // self.rows
        data = None
        if self.data is not None and row < len(self.data) and col < len(self.data[row]):
            data = self.data[row][col]
        return Grid.Cell(index, Position(col, row), Region(x0, y0, right=x1, bottom=y1), data)

    def get(self, index=None, position=None, region=None, data=None):
        """The cell with this ``index`` (negative counts from the end), at this
        ``position`` ((x, y) in cells; negative counts from the end), holding
        the centre of this ``region``, or holding this ``data``. IndexError
        when there is none."""
        given = [a is not None for a in (index, position, region, data)]
        if sum(given) != 1:
            raise ValueError("Grid.get needs exactly one of index, position, region, data")
        if index is not None:
            i = int(index)
            if i < 0:
                i += self.area
            if not 0 <= i < self.area:
                raise IndexError("index %r is outside the %dx%d grid" % (index, self.cols, self.rows))
            return self._cell(i)
        if position is not None:
            x, y = position
            x = x + self.cols if x < 0 else x
            y = y + self.rows if y < 0 else y
            if not (0 <= x < self.cols and 0 <= y < self.rows):
                raise IndexError("position %r is outside the %dx%d grid" % (position, self.cols, self.rows))
            return self._cell(y * self.cols + x)
        if region is not None:
            c = region.center
            for cell in self.cells:
                if cell.region.contains(c):
                    return cell
            raise IndexError("%r is not inside %r" % (region, self))
        for cell in self.cells:
            if cell.data == data:
                return cell
        raise IndexError("no cell of %r holds %r" % (self, data))

    def __getitem__(self, key):
        if isinstance(key, Region):
            return self.get(region=key)
        if isinstance(key, numbers.Integral):
            return self.get(index=key)
        if isinstance(key, tuple) and len(key) == 2 and all(isinstance(v, numbers.Integral) for v in key):
            return self.get(position=key)
        return self.get(data=key)


Grid.__module__ = "stbt_core"
