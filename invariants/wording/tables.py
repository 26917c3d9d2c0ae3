"""The slot tables: which texts state one fact, in which language, at which level.

A fact is a slot, a polarity and an object ("coffee_preference", likes, americano),
written under a *tag* that keeps its texts apart from every other fact of a run;
:func:`phrasing` gives all its texts (see :mod:`invariants.wording` for the levels).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

__all__ = ["LANGS", "SLOTS", "Lang", "Phrasing", "SlotWording", "Templates", "phrasing"]

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")


@dataclass(frozen=True, slots=True)
class Templates:
    """Templates of one polarity of a slot, per language; ``{x}`` stands for the object.

    The first lexical template of each language is the canonical one.
    """

    lexical: Mapping[Lang, tuple[str, ...]]
    semantic: Mapping[Lang, tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class SlotWording:
    """Everything the scenarios and the stateful machine may say about one slot.

    ``attribute`` is the canonical attribute name, which is also the slot's id in the
    ground truth. ``objects`` maps each object to its names per language, canonical
    first; names never differ from each other by spelling alone, since spelling is what
    the surface level varies.
    """

    attribute: str
    attribute_variants: tuple[str, ...]
    objects: Mapping[str, Mapping[Lang, tuple[str, ...]]]
    positive: Templates
    negative: Templates


def _templates(
    en: tuple[str, ...], zh: tuple[str, ...], en_free: tuple[str, ...], zh_free: tuple[str, ...]
) -> Templates:
    return Templates(
        lexical=MappingProxyType({"en": en, "zh": zh}),
        semantic=MappingProxyType({"en": en_free, "zh": zh_free}),
    )


def _objects(
    table: dict[str, tuple[tuple[str, ...], tuple[str, ...]]],
) -> Mapping[str, Mapping[Lang, tuple[str, ...]]]:
    return MappingProxyType(
        {name: MappingProxyType({"en": en, "zh": zh}) for name, (en, zh) in table.items()}
    )


_LIKE_EN = (
    "likes {x}",
    "prefers {x}",
    "loves {x}",
    "enjoys {x}",
    "is a fan of {x}",
    "is fond of {x}",
    "usually drinks {x}",
    "often drinks {x}",
    "usually orders {x}",
    "the user likes {x}",
    "I like {x}",
)
_LIKE_ZH = (
    "喜欢{x}",
    "偏好{x}",
    "喜欢喝{x}",
    "爱喝{x}",
    "常喝{x}",
    "经常喝{x}",
    "最爱{x}",
    "平时喝{x}",
    "习惯喝{x}",
    "我喜欢{x}",
    "用户喜欢{x}",
)
_DISLIKE_EN = (
    "does not like {x}",
    "doesn't like {x}",
    "dislikes {x}",
    "is not a fan of {x}",
    "is not fond of {x}",
    "hates {x}",
    "can't stand {x}",
    "does not enjoy {x}",
)
_DISLIKE_ZH = ("不喜欢{x}", "讨厌{x}", "不爱喝{x}", "不喜欢喝{x}", "不太喜欢{x}", "反感{x}")
_DISLIKE_FREE_EN = ("{x} is just not for me", "would never order {x}")
_DISLIKE_FREE_ZH = ("{x}我一口都不想喝", "{x}不是我的菜")

SLOTS: Mapping[str, SlotWording] = MappingProxyType(
    {
        "coffee_preference": SlotWording(
            attribute="coffee_preference",
            attribute_variants=(
                "favorite_coffee",
                "favourite coffee",
                "preferred coffee",
                "usual coffee",
                "coffee order",
                "coffee",
                "咖啡偏好",
                "咖啡口味",
                "喜欢的咖啡",
                "最喜欢的咖啡",
            ),
            objects=_objects(
                {
                    "americano": (
                        ("americano", "an americano", "americanos", "caffe americano",
                         "americano coffee"),
                        ("美式", "美式咖啡"),
                    ),
                    "latte": (
                        ("latte", "a latte", "lattes", "caffe latte", "cafe latte"),
                        ("拿铁", "拿铁咖啡", "拿鐵"),
                    ),
                    "cappuccino": (
                        ("cappuccino", "a cappuccino", "cappuccinos"),
                        ("卡布奇诺", "卡布奇諾"),
                    ),
                    "espresso": (
                        ("espresso", "an espresso", "espressos"),
                        ("浓缩咖啡", "意式浓缩", "意式浓缩咖啡"),
                    ),
                    "mocha": (("mocha", "a mocha", "mochas"), ("摩卡", "摩卡咖啡")),
                    "flat white": (
                        ("flat white", "a flat white", "flat whites"),
                        ("澳白", "馥芮白"),
                    ),
                    "iced americano": (
                        ("iced americano", "an iced americano", "iced americanos"),
                        ("冰美式", "冰美式咖啡"),
                    ),
                }
            ),
            positive=_templates(
                (*_LIKE_EN, "favorite coffee is {x}", "my favourite coffee is {x}"),
                (*_LIKE_ZH, "最喜欢的咖啡是{x}"),
                ("I'm really into {x}", "{x} is my go-to order", "starts every morning with {x}"),
                ("{x}是我的首选", "每天早上都要来一杯{x}"),
            ),
            negative=_templates(_DISLIKE_EN, _DISLIKE_ZH, _DISLIKE_FREE_EN, _DISLIKE_FREE_ZH),
        ),
        "drink_preference": SlotWording(
            attribute="drink_preference",
            attribute_variants=(
                "favorite drink",
                "favourite_drink",
                "preferred drink",
                "favorite beverage",
                "drink",
                "beverage",
                "饮品偏好",
                "饮料偏好",
                "喜欢的饮料",
                "饮料",
            ),
            objects=_objects(
                {
                    "milk tea": (("milk tea",), ("奶茶",)),
                    "green tea": (("green tea",), ("绿茶", "綠茶")),
                    "black tea": (("black tea",), ("红茶", "紅茶")),
                }
            ),
            positive=_templates(
                (*_LIKE_EN, "favorite drink is {x}", "my preferred drink is {x}"),
                (*_LIKE_ZH, "最喜欢的饮料是{x}"),
                ("I'm really into {x}", "{x} is what I reach for"),
                ("{x}是我的首选", "每天下午都要来一杯{x}"),
            ),
            negative=_templates(_DISLIKE_EN, _DISLIKE_ZH, _DISLIKE_FREE_EN, _DISLIKE_FREE_ZH),
        ),
        "city": SlotWording(
            attribute="city",
            attribute_variants=(
                "home city",
                "current_city",
                "city of residence",
                "residence",
                "location",
                "城市",
                "所在城市",
                "居住城市",
                "常住城市",
                "居住地",
            ),
            objects=_objects(
                {
                    "beijing": (("Beijing", "Peking"), ("北京", "北京市")),
                    "shanghai": (("Shanghai",), ("上海", "上海市")),
                    "shenzhen": (("Shenzhen",), ("深圳", "深圳市")),
                    "guangzhou": (("Guangzhou", "Canton"), ("广州", "广州市")),
                    "hangzhou": (("Hangzhou",), ("杭州", "杭州市")),
                    "hong kong": (("Hong Kong", "Hongkong"), ("香港",)),
                    "new york": (("New York", "NYC", "New York City"), ("纽约", "纽约市")),
                    "london": (("London",), ("伦敦",)),
                    "tokyo": (("Tokyo",), ("东京",)),
                    "singapore": (("Singapore",), ("新加坡",)),
                }
            ),
            positive=_templates(
                ("lives in {x}", "resides in {x}", "is based in {x}", "living in {x}",
                 "I live in {x}", "is located in {x}"),
                ("住在{x}", "居住在{x}", "生活在{x}", "常住在{x}", "定居在{x}", "现居{x}",
                 "我住在{x}"),
                ("calls {x} home", "has an apartment in {x}"),
                ("{x}是我的家", "家安在{x}"),
            ),
            negative=_templates(
                ("does not live in {x}", "doesn't live in {x}"),
                ("不住在{x}", "没有住在{x}", "不生活在{x}"),
                ("has never had a home in {x}",),
                ("{x}不是我住的地方",),
            ),
        ),
        "language": SlotWording(
            attribute="language",
            attribute_variants=(
                "languages",
                "preferred language",
                "spoken_language",
                "语言",
                "常用语言",
                "使用语言",
                "偏好语言",
            ),
            objects=_objects(
                {
                    "english": (("English",), ("英语", "英文")),
                    "chinese": (("Chinese", "Mandarin", "Mandarin Chinese"),
                                ("中文", "汉语", "普通话")),
                    "japanese": (("Japanese",), ("日语", "日文")),
                    "french": (("French",), ("法语", "法文")),
                    "german": (("German",), ("德语", "德文")),
                    "spanish": (("Spanish",), ("西班牙语",)),
                    "korean": (("Korean",), ("韩语", "韩文")),
                    "cantonese": (("Cantonese",), ("粤语", "广东话")),
                }
            ),
            positive=_templates(
                ("speaks {x}", "can speak {x}", "is fluent in {x}", "fluent in {x}",
                 "I speak {x}"),
                ("会说{x}", "会讲{x}", "能说{x}", "我会说{x}"),
                ("gets by fine in {x}", "grew up talking in {x}"),
                ("{x}是我的工作语言", "平时交流都用{x}"),
            ),
            negative=_templates(
                ("does not speak {x}", "doesn't speak {x}"),
                ("不会说{x}", "不会讲{x}"),
                ("knows no {x} at all",),
                ("{x}一句也不会",),
            ),
        ),
        "job": SlotWording(
            attribute="job",
            attribute_variants=(
                "occupation",
                "profession",
                "job_title",
                "position",
                "role",
                "职业",
                "工作",
                "职位",
                "岗位",
            ),
            objects=_objects(
                {
                    "software engineer": (
                        ("software engineer", "a software engineer", "software developer",
                         "a programmer", "SWE"),
                        ("软件工程师", "程序员"),
                    ),
                    "product manager": (("product manager", "a product manager"), ("产品经理",)),
                    "data scientist": (("data scientist", "a data scientist"), ("数据科学家",)),
                    "designer": (("designer", "a designer"), ("设计师",)),
                    "teacher": (("teacher", "a teacher"), ("老师", "教师")),
                    "doctor": (("doctor", "a doctor", "physician", "a physician"),
                               ("医生", "大夫")),
                    "student": (("student", "a student"), ("学生",)),
                }
            ),
            positive=_templates(
                ("works as {x}", "is employed as {x}", "working as {x}", "my job is {x}",
                 "occupation is {x}"),
                ("职业是{x}", "工作是{x}", "担任{x}", "我的职业是{x}"),
                ("earns a living as {x}", "spends the workday as {x}"),
                ("靠当{x}谋生", "在做{x}这一行"),
            ),
            negative=_templates(
                ("does not work as {x}", "doesn't work as {x}"),
                ("不担任{x}", "没有担任{x}"),
                ("has never held a job as {x}",),
                ("从没当过{x}",),
            ),
        ),
    }
)


@dataclass(frozen=True, slots=True)
class Phrasing:
    """Every text of one fact, each ending in the fact's tag.

    ``canonical`` is the plain form the others are judged against; ``lexical`` and
    ``semantic`` hold the variants of those levels (surface variants are made from the
    canonical text on demand, by :func:`~invariants.wording.variants.surface_variant`).
    """

    canonical: str
    lexical: tuple[str, ...]
    semantic: tuple[str, ...]


def phrasing(slot: str, positive: bool, obj: str, tag: str, lang: Lang) -> Phrasing:
    """The texts of "``slot``: (not) ``obj``" under ``tag``, canonical in ``lang``."""
    table = SLOTS[slot]
    templates = table.positive if positive else table.negative
    names = table.objects[obj]
    canonical = _tagged(templates.lexical[lang][0].format(x=names[lang][0]), tag)
    lexical = tuple(
        text
        for other in LANGS
        for template in templates.lexical[other]
        for name in names[other]
        if (text := _tagged(template.format(x=name), tag)) != canonical
    )
    semantic = tuple(
        _tagged(template.format(x=name), tag)
        for other in LANGS
        for template in templates.semantic[other]
        for name in names[other][:1]
    )
    return Phrasing(canonical, lexical, semantic)


def _tagged(text: str, tag: str) -> str:
    return f"{text} [{tag}]"
