"""Labelled pairs of memory values for the embedder benchmark: one fact or two.

Two sources. :func:`generated` takes the scenarios' own ground truth
(:mod:`scenarios.paraphrases`), tagged the way ``paraphrase_flood`` tags a topic, so
the figures say what a ``--level semantic`` certification will meet. :data:`HANDWRITTEN`
is written for this benchmark, about things agents are told to remember beyond the
scenarios' five slots: allergies, schedules, family, money, habits. It holds the
traps an embedder falls into: a changed number, identifier, name or time in an otherwise equal
sentence, an antonym with no negation word, and a true paraphrase that happens to
contain one ("can't eat peanuts").

Lexical variants are left out: the lexicon folds them to one key before any model is
asked, so they measure the lexicon, not the embedder.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from scenarios import list_scenarios
from scenarios.generators import PLAIN, scenario_code
from scenarios.paraphrases import LANGS, SLOTS, Lang, phrasing

__all__ = ["HANDWRITTEN", "Kind", "Pair", "generated"]

#: ``same``: one fact, must merge. ``negation``: opposite polarity, must not.
#: ``value``: another object, number, name or time, must not.
Kind = Literal["same", "negation", "value"]
PairLang = Literal["en", "zh", "mixed"]

#: One tag for every generated text, as one topic of ``paraphrase_flood`` uses one tag
#: for all its facts: the must-not-merge pairs there share it too.
TAG = "pf1"


@dataclass(frozen=True, slots=True)
class Pair:
    a: str
    b: str
    kind: Kind
    lang: PairLang
    source: Literal["generated", "handwritten"]

    @property
    def must_merge(self) -> bool:
        return self.kind == "same"


def _lang_of(text: str) -> Lang:
    return "zh" if any("\u4e00" <= char <= "\u9fff" for char in text) else "en"


def _pair(a: str, b: str, kind: Kind, source: Literal["generated", "handwritten"]) -> Pair:
    first, second = _lang_of(a), _lang_of(b)
    return Pair(a, b, kind, first if first == second else "mixed", source)


def generated() -> list[Pair]:
    """Every slot, object and language of the scenario tables, in three kinds of pair.

    ``same``: a canonical text and each of its free (semantic) paraphrases, in both
    languages, as ``paraphrase_flood`` writes them after it. ``negation``: a canonical
    text and each wording of its negation. ``value``: the same template, plain or free,
    with the next object of the slot. And the plain facts of the other scenarios, whose
    texts differ only in their tag ("lives in city-oooc305", "lives in city-oooc306"),
    as ``value`` pairs: they are different facts of one slot. A pair met twice (a free
    paraphrase in the other language is the same text whichever language the fact
    started in) is kept once.
    """
    pairs: list[Pair] = []
    for slot, table in SLOTS.items():
        objects = list(table.objects)
        for index, obj in enumerate(objects):
            other = objects[(index + 1) % len(objects)]
            for lang in LANGS:
                pos = phrasing(slot, True, obj, TAG, lang)
                neg = phrasing(slot, False, obj, TAG, lang)
                for words in (pos, neg):
                    pairs.extend(_pair(words.canonical, s, "same", "generated")
                                 for s in words.semantic)
                pairs.append(_pair(pos.canonical, neg.canonical, "negation", "generated"))
                pairs.extend(_pair(pos.canonical, n, "negation", "generated")
                             for n in neg.semantic)
                pairs.extend(_pair(p, neg.canonical, "negation", "generated")
                             for p in pos.semantic)
                moved = phrasing(slot, True, other, TAG, lang)
                pairs.append(_pair(pos.canonical, moved.canonical, "value", "generated"))
                pairs.extend(_pair(p, q, "value", "generated")
                             for p, q in zip(pos.semantic, moved.semantic, strict=True))
    for template in PLAIN.values():
        for code in map(scenario_code, list_scenarios()):
            pairs.extend(_pair(template.format(tag=f"{code}{n}"),
                               template.format(tag=f"{code}{n + 1}"), "value", "generated")
                         for n in (1, 17, 305))
    return list(dict.fromkeys(pairs))


def _hand(kind: Kind, rows: tuple[tuple[str, str], ...]) -> list[Pair]:
    return [_pair(a, b, kind, "handwritten") for a, b in rows]


HANDWRITTEN: tuple[Pair, ...] = (
    *_hand("same", (
        ("is allergic to peanuts", "has a peanut allergy"),
        ("works from home on Fridays", "does remote work every Friday"),
        ("has two cats", "owns a pair of cats"),
        ("wakes up at 6 am", "gets up at six in the morning"),
        ("is vegetarian", "follows a vegetarian diet"),
        ("prefers window seats on flights", "likes to sit by the window when flying"),
        ("drives a Tesla", "owns a Tesla car"),
        ("is learning Spanish", "is studying Spanish"),
        ("plays tennis on weekends", "spends weekends playing tennis"),
        ("her birthday is March 3", "was born on the third of March"),
        ("uses a Mac for work", "works on a MacBook"),
        ("is married to Tom", "Tom is her husband"),
        ("goes to the gym every morning", "works out each morning before work"),
        ("is afraid of flying", "has a fear of airplanes"),
        ("prefers tea over coffee", "would rather drink tea than coffee"),
        ("has a daughter named Lily", "Lily is his daughter"),
        ("lives with two roommates", "shares an apartment with two roommates"),
        ("is a night owl", "tends to stay up late"),
        ("reads science fiction", "enjoys sci-fi novels"),
        ("commutes by bike", "cycles to work"),
        ("budget for the trip is 2000 dollars", "plans to spend $2000 on the trip"),
        ("favorite color is green", "likes green best of all colors"),
        ("is training for a marathon", "is preparing to run a marathon"),
        ("takes the 8:15 train", "catches the 8:15 train every morning"),
        ("prefers email to phone calls", "would rather be contacted by email than by phone"),
        ("speaks fluent German", "is fluent in German"),
        ("is left-handed", "writes with the left hand"),
        ("wants a quiet hotel room", "asks for a hotel room away from noise"),
        ("has type 2 diabetes", "was diagnosed with type 2 diabetes"),
        ("is moving to Berlin next month", "will relocate to Berlin in a month"),
        ("the meeting is on Tuesday at 3 pm", "the meeting takes place Tuesday at 15:00"),
        ("only eats kosher food", "keeps kosher"),
        ("is allergic to peanuts", "can't eat peanuts without a reaction"),
        ("对花生过敏", "有花生过敏症"),
        ("每周五在家办公", "周五都是远程上班"),
        ("养了两只猫", "家里有两只猫"),
        ("每天早上六点起床", "早上6点起"),
        ("是素食者", "只吃素"),
        ("坐飞机喜欢靠窗的位置", "乘机时偏爱窗边座位"),
        ("开特斯拉", "自己的车是特斯拉"),
        ("正在学西班牙语", "最近在学习西语"),
        ("周末打网球", "周末一般去打网球"),
        ("生日是三月三日", "3月3号出生"),
        ("工作用Mac", "上班用苹果电脑"),
        ("妻子叫小美", "小美是他的老婆"),
        ("每天早上去健身房", "每天早晨都会健身"),
        ("害怕坐飞机", "有飞行恐惧"),
        ("比起咖啡更喜欢茶", "喝茶多过喝咖啡"),
        ("女儿叫莉莉", "莉莉是他的女儿"),
        ("和两个室友合租", "跟两位室友一起住"),
        ("是个夜猫子", "习惯熬夜"),
        ("喜欢看科幻小说", "爱读科幻书"),
        ("骑自行车上班", "每天骑车通勤"),
        ("这次旅行预算两千元", "旅行打算花2000块"),
        ("最喜欢绿色", "最爱的颜色是绿色"),
        ("在准备跑马拉松", "正为马拉松做训练"),
        ("喜欢用邮件联系", "偏好通过电子邮件沟通"),
        ("德语说得很流利", "能讲一口流利的德语"),
        ("是左撇子", "习惯用左手写字"),
        ("患有二型糖尿病", "被诊断出2型糖尿病"),
        ("下个月搬到柏林", "一个月后要搬去柏林"),
        ("周二下午三点开会", "会议在星期二15点"),
        ("住在海淀区", "家在海淀"),
        ("对花生过敏", "一吃花生就不舒服"),
        ("has two cats", "养了两只猫"),
        ("is vegetarian", "是素食者"),
        ("is left-handed", "是左撇子"),
        ("is afraid of flying", "害怕坐飞机"),
        ("works from home on Fridays", "每周五在家办公"),
        ("drives a Tesla", "开特斯拉"),
    )),
    *_hand("negation", (
        ("is allergic to peanuts", "is not allergic to peanuts"),
        ("eats meat", "does not eat meat"),
        ("has a car", "has no car"),
        ("wants notifications", "does not want notifications"),
        ("is married", "is not married"),
        ("drinks alcohol", "never drinks alcohol"),
        ("likes spicy food", "dislikes spicy food"),
        ("can swim", "cannot swim"),
        ("wants to be called by phone", "does not want to be called by phone"),
        ("works on weekends", "doesn't work on weekends"),
        ("has children", "has no children"),
        ("will attend the wedding", "won't attend the wedding"),
        ("is available on Monday", "is not available on Monday"),
        ("takes sugar in coffee", "takes coffee without sugar"),
        ("trusts the new manager", "does not trust the new manager"),
        ("supports the proposal", "opposes the proposal"),
        ("is an early riser", "hates getting up early"),
        ("对花生过敏", "对花生不过敏"),
        ("吃肉", "不吃肉"),
        ("有车", "没有车"),
        ("想接收通知", "不想接收通知"),
        ("已经结婚了", "还没结婚"),
        ("喝酒", "从不喝酒"),
        ("喜欢吃辣", "不喜欢吃辣"),
        ("会游泳", "不会游泳"),
        ("周末加班", "周末不加班"),
        ("有孩子", "没有孩子"),
        ("会参加婚礼", "不参加婚礼"),
        ("周一有空", "周一没空"),
        ("咖啡加糖", "咖啡不加糖"),
        ("相信新经理", "不信任新经理"),
        ("同意这个方案", "反对这个方案"),
        ("喜欢早起", "讨厌早起"),
    )),
    *_hand("value", (
        ("is allergic to peanuts", "is allergic to shellfish"),
        ("has two cats", "has three cats"),
        ("wakes up at 6 am", "wakes up at 8 am"),
        ("lives in Paris", "lives in Lyon"),
        ("the meeting is on Tuesday at 3 pm", "the meeting is on Thursday at 3 pm"),
        ("drives a Tesla", "drives a Toyota"),
        ("is learning Spanish", "is learning Italian"),
        ("budget for the trip is 2000 dollars", "budget for the trip is 5000 dollars"),
        ("favorite color is green", "favorite color is blue"),
        ("prefers window seats on flights", "prefers aisle seats on flights"),
        ("has a daughter named Lily", "has a daughter named Emma"),
        ("plays tennis on weekends", "plays golf on weekends"),
        ("takes the 8:15 train", "takes the 9:40 train"),
        ("is vegetarian", "is vegan"),
        ("uses a Mac for work", "uses a Windows laptop for work"),
        ("shoe size is 42", "shoe size is 44"),
        ("is married to Tom", "is married to Jack"),
        ("works at Google", "works at Microsoft"),
        ("prefers tea over coffee", "prefers coffee over tea"),
        ("对花生过敏", "对海鲜过敏"),
        ("养了两只猫", "养了三只猫"),
        ("每天早上六点起床", "每天早上八点起床"),
        ("住在北京", "住在天津"),
        ("周二下午三点开会", "周四下午三点开会"),
        ("开特斯拉", "开丰田"),
        ("正在学西班牙语", "正在学意大利语"),
        ("这次旅行预算两千元", "这次旅行预算五千元"),
        ("最喜欢绿色", "最喜欢蓝色"),
        ("坐飞机喜欢靠窗的位置", "坐飞机喜欢靠过道的位置"),
        ("女儿叫莉莉", "女儿叫艾玛"),
        ("周末打网球", "周末打高尔夫"),
        ("坐八点一刻的火车", "坐九点四十的火车"),
        ("是素食者", "是纯素食者"),
        ("工作用Mac", "工作用Windows笔记本"),
        ("鞋码是42", "鞋码是44"),
        ("在谷歌工作", "在微软工作"),
        ("比起咖啡更喜欢茶", "比起茶更喜欢咖啡"),
        ("order #4411 has shipped", "order #4412 has shipped"),
        ("booked flight CA981 to Paris", "booked flight CA982 to Paris"),
        ("is staying in room 1203", "is staying in room 1208"),
        ("the invoice total is 1,250 dollars", "the invoice total is 1,280 dollars"),
        ("licence plate is B-XK 4471", "licence plate is B-XK 4477"),
        ("订单4411已经发货", "订单4412已经发货"),
        ("订了去巴黎的CA981航班", "订了去巴黎的CA982航班"),
        ("住在1203房间", "住在1208房间"),
        ("发票金额是1250元", "发票金额是1280元"),
        ("车牌号是京A12345", "车牌号是京A12346"),
        ("has two cats", "养了三只猫"),
        ("lives in Paris", "住在里昂"),
    )),
)
