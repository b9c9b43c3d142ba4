# This file is mostly prose data (prompts and passages), so long lines are allowed here.
# ruff: noqa: E501
"""Generate ``data/train_prompts.jsonl``: 300 prompts for self-distillation.

The target model (SmolLM2-135M-Instruct) answers these prompts, and the
resulting (prompt, response) pairs are used to train draft models and Medusa
heads. The prompts cover the seven benchmark categories of ``prompts.jsonl``
(coding, math, summarization, translation, qa, rag, writing) plus ``chat``,
but use different topics and texts so that no benchmark prompt leaks into
training.

Most prompts are written out by hand below. Some are built from templates:
math word problems get random (but clean) numbers, and the rag and
summarization sets fill short fictional passages with names, places, dates
and prices. All passages and facts about fictional places, companies and
people are invented for this project.

Output format is the Spec-Bench / MT-Bench ``question.jsonl`` format, one JSON
object per line: ``{"question_id": int, "category": str, "turns": [str]}``.

The output is deterministic (fixed seed, no external inputs). Run it from
anywhere::

    python data/make_train_prompts.py

It overwrites ``train_prompts.jsonl`` next to this script (the sibling builders ``prompt_bank.py`` and
``doc_prompts.py`` make the larger sets: data/README.md).
"""

import random
from pathlib import Path

SEED = 1234
OUT_PATH = Path(__file__).resolve().parent / "train_prompts.jsonl"

# Prompts per category (sums to 300).
COUNTS = {
    "coding": 38,
    "math": 37,
    "summarization": 37,
    "translation": 37,
    "qa": 38,
    "rag": 38,
    "writing": 37,
    "chat": 38,
}

FIRST_NAMES = [
    "Amira",
    "Ben",
    "Carla",
    "Dev",
    "Elena",
    "Felix",
    "Grace",
    "Hiro",
    "Isla",
    "Jonah",
    "Keiko",
    "Leo",
    "Maya",
    "Nikolai",
    "Olivia",
    "Pablo",
    "Rosa",
    "Samuel",
    "Tara",
    "Victor",
    "Wen",
    "Yusuf",
    "Zoe",
    "Lucas",
    "Nadia",
]
LAST_NAMES = [
    "Alvarez",
    "Brennan",
    "Chen",
    "Dubois",
    "Eriksen",
    "Fischer",
    "Gupta",
    "Haddad",
    "Ivanova",
    "Jensen",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Osei",
    "Petrov",
    "Quinn",
    "Rossi",
    "Santos",
    "Tanaka",
    "Varga",
    "Walsh",
]
TOWNS = [
    "Ashford Bay",
    "Birchwood",
    "Cedar Falls",
    "Dunmore",
    "Elmstead",
    "Fernhill",
    "Glenrock",
    "Hollow Creek",
    "Ironbridge",
    "Juniper Valley",
    "Kingsmere",
    "Lakeview",
    "Millbrook",
    "Northgate",
    "Oakridge",
    "Pinecrest",
    "Redfield",
    "Stonehaven",
    "Thornbury",
    "Westmoor",
]
MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


# =============================================================== coding
CODE_TASKS = [
    "reverses the order of the words in a sentence",
    "returns the n-th Fibonacci number",
    "checks whether a number is prime",
    "converts a temperature from Celsius to Fahrenheit",
    "removes duplicate items from a list while keeping the original order",
    "returns the median of a list of numbers",
    "counts the vowels in a string",
    "flattens a list of lists into a single list",
    "checks whether two strings are anagrams of each other",
    "returns the factorial of a non-negative integer",
    "finds the greatest common divisor of two integers",
    "converts a Roman numeral such as 'XIV' into an integer",
    "splits a list into chunks of size n",
    "capitalizes the first letter of every word in a string",
    "returns the keys of a dictionary whose values are greater than a given threshold",
    "checks whether a year is a leap year",
    "reads a text file and returns the number of lines in it",
    "merges two dictionaries, adding the values together for keys that appear in both",
    "checks that a string looks like an email address, with exactly one @ and a dot after it",
    "rotates a list to the right by k positions",
    "returns the running total of a list of numbers",
    "converts a number of seconds into hours, minutes and seconds",
]
CODE_OPENERS = [
    "Write a Python function that {task}.",
    "Implement a Python function that {task}. Include a short example of how to call it.",
    "Can you write a JavaScript function that {task}?",
    "Write a short Python function that {task}, and explain how it works in one or two sentences.",
]

CODE_FIX = [
    """This function should return True for even numbers, but it does the opposite. Fix it.

```python
def is_even(n):
    return n % 2 == 1
```""",
    """Why does this function not reverse the string? Please fix it.

```python
def reverse_string(s):
    return s[::1]
```""",
    """This function converts Fahrenheit to Celsius, but the results are wrong. For example, 212 should give 100. Find and fix the mistake.

```python
def fahrenheit_to_celsius(f):
    return (f - 32) * 9 / 5
```""",
    """This function raises an IndexError. What is wrong, and how do I fix it?

```python
def last_item(items):
    return items[len(items)]
```""",
    """This JavaScript function prints an error saying that Name is not defined. Fix the bug.

```javascript
function greet(name) {
  return "Hello, " + Name + "!";
}
```""",
    """This code should count how many times each letter appears in a word, but it raises a KeyError. Fix it.

```python
def letter_counts(word):
    counts = {}
    for ch in word:
        counts[ch] += 1
    return counts
```""",
    """When I call this function twice, the second list still contains the item from the first call. Why does this happen and how do I fix it?

```python
def add_item(item, basket=[]):
    basket.append(item)
    return basket
```""",
    """This loop is supposed to print the numbers 1 to 10, but it never stops. Fix it.

```python
i = 1
while i <= 10:
    print(i)
```""",
]

CODE_CONCEPTS = [
    "Explain the difference between a list and a tuple in Python.",
    "What does the git rebase command do, and how is it different from git merge?",
    "What is recursion? Give a short Python example.",
    "When should I use a dictionary instead of a list in Python?",
    "What is the difference between == and is in Python?",
    "Explain what a REST API is in simple terms.",
    "What does SELECT DISTINCT do in SQL? Show a small example.",
    "What is a race condition in programming, and how can it be avoided?",
]


def make_coding(rng):
    prompts = []
    for i, task in enumerate(CODE_TASKS):
        prompts.append(CODE_OPENERS[i % len(CODE_OPENERS)].format(task=task))
    prompts += CODE_FIX + CODE_CONCEPTS
    return prompts


# =============================================================== math
def _name(rng):
    return rng.choice(FIRST_NAMES)


def m_orchard(rng):
    rows, per = rng.randint(6, 24), rng.randint(8, 30)
    return f"A farmer plants {rows} rows of apple trees with {per} trees in each row. How many apple trees does the farmer plant in total?"


def m_linear(rng):
    a, b = rng.randint(2, 9), rng.randint(1, 9)
    x = b + rng.randint(1, 10)
    return f"Solve for x: {a}(x - {b}) = {a * (x - b)}. Show your work."


def m_fuel(rng):
    per100, dist = rng.choice([5, 6, 7, 8, 9]), rng.choice([250, 300, 450, 600, 750])
    return f"A car uses {per100} liters of fuel for every 100 kilometers. How much fuel does it need for a trip of {dist} kilometers?"


def m_savings(rng):
    weekly, weeks = rng.choice([12, 15, 20, 25, 30]), rng.randint(6, 16)
    spent = rng.randrange(50, weekly * weeks - 10, 5)
    return f"{_name(rng)} saves ${weekly} every week for {weeks} weeks and then spends ${spent} on a new bicycle. How much money is left?"


def m_percent(rng):
    p, n = rng.choice([10, 15, 20, 30, 40, 75]), rng.choice([60, 80, 120, 140, 250, 360])
    return f"What is {p}% of {n}? Explain how you calculated it."


def m_recipe(rng):
    cups, muffins = rng.choice([2, 3]), rng.choice([12, 16])
    k = rng.choice([2, 3, 4])
    return f"A recipe needs {cups} cups of flour to make {muffins} muffins. How many cups of flour are needed to make {muffins * k} muffins?"


def m_consecutive(rng):
    n = rng.randint(10, 60)
    return f"The sum of two consecutive integers is {2 * n + 1}. What are the two integers?"


def m_triangle(rng):
    a, b = rng.randint(30, 80), rng.randint(20, 70)
    return f"Two angles of a triangle measure {a} degrees and {b} degrees. What is the size of the third angle?"


def m_simplify(rng):
    a, b, c = rng.randint(2, 6), rng.randint(1, 9), rng.randint(2, 5)
    return f"Simplify the expression {a}(x + {b}) - {c}x."


def m_tank(rng):
    rate, minutes = rng.choice([4, 5, 8, 12, 15]), rng.randint(10, 40)
    return f"A water tank holds {rate * minutes} liters. Water drains out at {rate} liters per minute. How many minutes does it take for the tank to empty?"


def m_circle(rng):
    r = rng.randint(2, 12)
    return f"What is the area of a circle with a radius of {r} cm? Use 3.14 for pi."


def m_mean(rng):
    nums = [rng.randint(2, 40) for _ in range(rng.randint(4, 6))]
    return f"Find the mean of these numbers: {', '.join(map(str, nums))}."


def m_tickets(rng):
    mon, more = rng.randint(40, 150), rng.randint(10, 60)
    return f"A cinema sold {mon} tickets on Monday and {more} more tickets on Tuesday than on Monday. How many tickets did it sell over the two days?"


MATH_TEMPLATES = [
    m_orchard,
    m_linear,
    m_fuel,
    m_savings,
    m_percent,
    m_recipe,
    m_consecutive,
    m_triangle,
    m_simplify,
    m_tank,
    m_circle,
    m_mean,
    m_tickets,
]


def make_math(rng):
    prompts, seen = [], set()
    i = 0
    while len(prompts) < COUNTS["math"]:
        p = MATH_TEMPLATES[i % len(MATH_TEMPLATES)](rng)
        i += 1
        if p not in seen:
            seen.add(p)
            prompts.append(p)
    return prompts


# =============================================================== summarization
SUM_PASSAGES = [
    "Octopuses are among the most intelligent invertebrates. They can solve simple puzzles, open jars to reach food, and find their way through mazes. Each of their eight arms contains many nerve cells, so an arm can react to touch and taste partly on its own. Octopuses also change the color and texture of their skin in a fraction of a second, which helps them hide from predators and sneak up on prey.",
    "Tea has been drunk in China for thousands of years. At first it was used mainly as a medicine, but over time it became an everyday drink. Traders carried tea along land and sea routes to other parts of Asia, and in the 1600s it reached Europe. In Britain, tea became so popular that afternoon tea with cakes and sandwiches turned into a social custom that is still enjoyed today.",
    "A rainbow appears when sunlight shines through drops of water in the air. As light enters a raindrop, it bends and splits into its different colors, because each color bends by a slightly different amount. The light then reflects off the back of the drop and bends again as it leaves. To see a rainbow, you need to stand with the sun behind you and the rain in front of you.",
    "A volcano forms where melted rock, called magma, rises from deep inside the Earth. When the pressure becomes too great, the magma escapes through openings in the crust. Once it reaches the surface, it is called lava. Some volcanoes erupt explosively and throw ash high into the sky, while others release slow rivers of lava. Over many eruptions, layers of cooled lava and ash can build a mountain.",
    "Coral reefs cover a tiny part of the ocean floor, yet they are home to about a quarter of all known marine species. Reefs are built by small animals called coral polyps, which produce hard skeletons. Many corals depend on tiny algae that live inside them and provide food through sunlight. When the water becomes too warm, the corals push out the algae and turn white, which is known as coral bleaching.",
    "Before the printing press, books in Europe were copied by hand, which was slow and expensive. Around 1440, Johannes Gutenberg developed a press that used movable metal letters that could be arranged, inked, and reused. This made it possible to produce many copies of a book quickly. Books became cheaper, more people learned to read, and new ideas spread across Europe faster than ever before.",
    "The Arctic tern makes one of the longest journeys of any animal. Each year it flies from its breeding grounds in the Arctic to the coasts of Antarctica and back again. Because it follows winding routes to take advantage of winds, a single tern may travel more than 70,000 kilometers in a year. Over its lifetime of up to thirty years, it can fly a distance equal to several trips to the Moon and back.",
    "A refrigerator does not create cold; it moves heat from inside the fridge to the room outside. A special liquid called a refrigerant flows through pipes in the back and walls. Inside the fridge, the refrigerant turns into a gas and absorbs heat. A compressor then squeezes the gas, which makes it hot, and the heat is released through coils at the back. The refrigerant cools, turns back into a liquid, and the cycle repeats.",
    "The water cycle describes how water moves around the planet. The sun heats water in oceans, lakes, and rivers, and some of it evaporates into the air as water vapor. As the vapor rises and cools, it condenses into tiny droplets that form clouds. When the droplets grow heavy enough, they fall as rain or snow. The water then flows into rivers, soaks into the ground, or returns to the sea, and the cycle begins again.",
    "Chess is believed to have developed in India around the sixth century from a game called chaturanga. The game spread to Persia and then to the Arab world, and from there it reached Europe. Over the centuries, the rules changed. In the late 1400s, the queen became the most powerful piece on the board, which made the game faster and more exciting. Today chess is played by millions of people around the world, both in person and online.",
    "Honeybees have a clever way of telling each other where to find food. When a worker bee discovers a good patch of flowers, it returns to the hive and performs a special movement called the waggle dance. The direction of the dance shows the direction of the flowers compared to the sun, and the length of the waggle part shows how far away they are. Other bees watch the dance and then fly straight to the food.",
    "The ancient Olympic Games were held in Olympia, in Greece, every four years for more than a thousand years. Athletes competed in running, wrestling, boxing, chariot racing, and other events. Winners received a crown made of olive leaves, but they also gained great fame in their home cities. The modern Olympic Games began in Athens in 1896, and today they bring together athletes from almost every country in the world.",
    "Emperor penguins live in Antarctica and are the largest of all penguins. They breed during the harsh Antarctic winter. After the female lays a single egg, she passes it to the male and goes to sea to feed. The male keeps the egg warm on his feet under a fold of skin for about two months, eating nothing during that time. To survive the cold and wind, the males huddle together in large groups and take turns standing on the outside.",
    "Ocean tides are caused mainly by the pull of the Moon's gravity. The Moon pulls slightly harder on the side of the Earth that faces it, creating a bulge of water there, and a second bulge forms on the opposite side. As the Earth turns, most coastlines pass through both bulges, so they have two high tides and two low tides roughly every day. The sun also affects tides, and when the sun and Moon line up, tides are especially high.",
    "Paper was invented in China about two thousand years ago. Early papermakers soaked plant fibers, such as tree bark and old rags, in water and beat them into a pulp. The pulp was spread thinly over a screen and left to dry, forming a sheet. Paper was lighter and cheaper than bamboo strips or silk, which had been used for writing before. Knowledge of papermaking slowly spread west along trade routes and reached Europe many centuries later.",
    "Deserts are often very hot during the day but surprisingly cold at night. This is because desert air is very dry and there are usually few clouds. During the day, sunlight heats the ground quickly. At night, without clouds or moisture in the air to trap the warmth, the heat escapes back into the sky. In some deserts, the temperature can drop by more than twenty degrees Celsius between the afternoon and the middle of the night.",
    "The Moon does not make its own light; it reflects light from the sun. As the Moon travels around the Earth, we see different amounts of its sunlit side. When the Moon is between the Earth and the sun, the lit side faces away from us, and we call it a new moon. As it moves along its path, we see more and more of the lit side until the full moon. The whole cycle of phases takes about twenty-nine and a half days.",
    "Stretching regularly can help keep muscles flexible and joints moving freely. Many trainers recommend light activity, such as walking or gentle jogging, before stretching, because warm muscles stretch more easily. Each stretch should be held for about twenty to thirty seconds without bouncing, and it should feel like mild tension, never sharp pain. Stretching after exercise may also help the body cool down and relax.",
    "The first practical telephones appeared in the 1870s. Alexander Graham Bell received a patent for the telephone in 1876, although several other inventors were working on similar ideas at the same time. Early telephones were connected by wires, and calls had to be connected by human operators at a switchboard. Over the next century, automatic exchanges, long-distance cables, and eventually mobile networks changed the way people communicate.",
    "Sunflowers are famous for their large, bright yellow heads. Young sunflowers turn to follow the sun across the sky during the day, a behavior called heliotropism. At night, they slowly turn back to face the east, ready for the sunrise. When the plants grow older and their stems become stiff, most of them stop moving and remain facing east. The seeds in the center of the flower are eaten by birds and people and are pressed to make cooking oil.",
]

SUM_INSTRUCTIONS = [
    "Summarize the following paragraph in one sentence.\n\n{p}",
    "Write a two-sentence summary of this text:\n\n{p}",
    "Give a short summary of the passage below.\n\n{p}",
    "Summarize this text in three bullet points.\n\n{p}",
    "{p}\n\nSummarize the text above in your own words.",
    "Read the text and explain its main idea in one or two sentences.\n\n{p}",
]

NEWS_EVENTS = [
    (
        "a free outdoor movie night in {place}",
        "families brought blankets and picnic dinners, and a local bakery sold popcorn and lemonade",
        "the event was a simple way to bring neighbors together",
        "show a different film every month during the summer",
    ),
    (
        "a spring cleanup of the riverbank",
        "volunteers collected more than {bags} bags of litter, including old tires and a shopping cart",
        "the river looked cleaner than it had in years",
        "plant trees along the path next autumn",
    ),
    (
        "its first street food festival",
        "more than {stalls} food stalls served dishes from around the world, and a band played on a small stage",
        "local restaurants reported one of their busiest weekends of the year",
        "close more streets to traffic so the festival can grow",
    ),
    (
        "a charity fun run",
        "runners of all ages completed a five-kilometer course, and some of them ran in costumes",
        "the run raised money for the local children's hospital",
        "add a shorter route for young children",
    ),
    (
        "a repair café",
        "volunteers fixed broken toasters, lamps, bicycles, and clothing for free while visitors watched and learned",
        "many items that would have been thrown away were given a second life",
        "hold the event every two months",
    ),
]

REVIEW_ITEMS = [
    (
        "pair of hiking boots",
        "them",
        "They were comfortable straight out of the box and kept my feet dry during a long walk in the rain.",
        "the laces are too short and came undone several times",
    ),
    (
        "electric kettle",
        "it",
        "It boils water very quickly and switches off automatically, which I really like.",
        "it is louder than I expected and the handle gets a little warm",
    ),
    (
        "backpack",
        "it",
        "It has plenty of pockets, a padded section for a laptop, and the zips feel strong.",
        "the side pockets are too small to hold a normal water bottle",
    ),
    (
        "desk chair",
        "it",
        "It was easy to put together in about twenty minutes, and my back feels much better after long days at work.",
        "the armrests wobble slightly and cannot be adjusted",
    ),
    (
        "set of kitchen knives",
        "it",
        "They are very sharp, well balanced, and the wooden block looks great on the counter.",
        "they must be washed by hand because they are not safe for the dishwasher",
    ),
    (
        "portable speaker",
        "it",
        "The sound is clear and surprisingly loud for its size, and the battery lasts all day.",
        "connecting it to a second phone is confusing and the instructions do not help",
    ),
]

ANNOUNCE_ITEMS = [
    (
        "a delivery service for groceries",
        "customers can order through a simple website and receive their groceries within two hours",
        "The service will start in the city center and expand to nearby neighborhoods later in the year.",
    ),
    (
        "a tool-sharing program",
        "members can borrow drills, ladders, and garden tools for up to one week for a small yearly fee",
        "Tools can be reserved online and picked up at the town hall on weekday afternoons.",
    ),
    (
        "a free coding club for teenagers",
        "students aged 13 to 17 will learn to build simple games and websites with help from volunteer mentors",
        "Sessions will take place every Wednesday after school, and laptops will be provided.",
    ),
    (
        "an evening bus route",
        "buses will run every thirty minutes between the train station and the hospital until midnight",
        "The route is meant to help night-shift workers and visitors get home safely.",
    ),
    (
        "a community language exchange",
        "residents can meet every week to practice a new language with native speakers over coffee",
        "Beginners are welcome, and no registration is needed.",
    ),
    (
        "an online permit system",
        "residents can now apply for parking and building permits online instead of visiting an office in person",
        "Officials say most applications will be answered within five working days.",
    ),
]


def _person(rng):
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def s_news(rng, item):
    event, detail, reason, plan = item
    town = rng.choice(TOWNS)
    place = rng.choice(["the town square", "Riverside Park", "the school sports field"])
    detail = detail.format(bags=rng.randint(40, 120), stalls=rng.randint(20, 45))
    return (
        f"Last {rng.choice(['Saturday', 'Sunday'])}, {town} held {event.format(place=place)}. "
        f"About {rng.randrange(150, 900, 50)} people took part. {detail[0].upper() + detail[1:]}. "
        f"Organizer {_person(rng)} said that {reason}. "
        f"Because of the strong turnout, the organizers now plan to {plan}."
    )


def s_review(rng, item):
    product, pron, good, bad = item
    weeks = rng.choice(["two weeks", "three weeks", "a month", "two months"])
    stars = rng.choice(["four", "four", "three"])
    return (
        f"I bought this {product} {weeks} ago and have used {pron} almost every day. {good} "
        f"The price was fair compared to similar products. My only complaint is that {bad}. "
        f"Overall I am happy with {pron} and would recommend {pron} to a friend. I give {pron} {stars} stars out of five."
    )


def s_announce(rng, item):
    what, detail, extra = item
    town = rng.choice(TOWNS)
    month = rng.choice(MONTHS)
    return (
        f"The town council of {town} has announced {what}, starting on {month} {rng.randint(1, 28)}. "
        f"Under the new program, {detail}. {extra} "
        f"Council member {_person(rng)} said the idea came from suggestions made by residents at public meetings last year."
    )


def make_summarization(rng):
    texts = list(SUM_PASSAGES)
    texts += [s_news(rng, it) for it in NEWS_EVENTS]
    texts += [s_review(rng, it) for it in REVIEW_ITEMS]
    texts += [s_announce(rng, it) for it in ANNOUNCE_ITEMS]
    prompts = []
    for i, p in enumerate(texts):
        prompts.append(SUM_INSTRUCTIONS[i % len(SUM_INSTRUCTIONS)].format(p=p))
    return prompts


# =============================================================== translation
TRANSLATION_SENTENCES = [
    "Good morning! How are you today?",
    "Where is the nearest pharmacy?",
    "My favorite season is spring because the flowers start to bloom.",
    "Could you please speak a little more slowly?",
    "We are going to the beach this weekend if the weather is nice.",
    "I have been learning to play the piano for two years.",
    "My dentist appointment has been moved to Thursday afternoon.",
    "Please turn off the lights when you leave the room.",
    "My sister works as a nurse at the city hospital.",
    "How much does this jacket cost?",
    "I lost my keys this morning and had to wait for my roommate to come home.",
    "The children are playing football in the park.",
    "Do you know a good place to buy fresh fruit?",
    "I am sorry I am late. The traffic was terrible.",
    "Our neighbors have a small dog that barks every morning.",
    "Can you help me carry these boxes upstairs?",
    "The post office closes at noon on Saturdays.",
    "I usually drink tea in the morning and water during the day.",
    "Last summer we visited my grandparents in the countryside.",
    "Happy birthday! I hope you have a wonderful day.",
    "The doctor said I should rest for a few days.",
    "This book is more interesting than the one I read last month.",
    "Is there a bank near the hotel?",
    "It is very cold today, so don't forget your scarf.",
    "My phone battery is almost empty. Do you have a charger?",
    "We need to buy milk, bread, and eggs.",
    "He wants to become a teacher when he finishes university.",
    "The concert starts at half past seven.",
    "Thank you very much for your help yesterday.",
    "I would like to open a bank account.",
    "The garden looks beautiful after the rain.",
    "What time does the swimming pool open on Sunday?",
    "She speaks three languages: English, Arabic, and Portuguese.",
    "Please send me the report by Friday.",
    "We watched a funny film and laughed a lot.",
    "My office is on the fourth floor of that building.",
    "Excuse me, is this seat free?",
]
TRANSLATION_LANGS = ["French", "Spanish", "German"]
TRANSLATION_INSTRUCTIONS = [
    "Translate into {lang}: {s}",
    'How do you say this in {lang}? "{s}"',
    "Translate the following sentence from English to {lang}:\n\n{s}",
    "Please translate this into {lang}:\n\n{s}",
]


def make_translation(rng):
    prompts = []
    for i, s in enumerate(TRANSLATION_SENTENCES):
        lang = TRANSLATION_LANGS[i % len(TRANSLATION_LANGS)]
        instr = TRANSLATION_INSTRUCTIONS[(i // len(TRANSLATION_LANGS)) % len(TRANSLATION_INSTRUCTIONS)]
        prompts.append(instr.format(lang=lang, s=s))
    return prompts


# =============================================================== qa
QA = [
    "Why do onions make people cry when they cut them?",
    "How does the heart pump blood around the body?",
    "What is the largest planet in our solar system?",
    "What is gravity?",
    "Why does ice float on water?",
    "Who painted the Mona Lisa?",
    "What is the difference between an ocean and a sea?",
    "How do airplanes stay in the air?",
    "What is DNA?",
    "What is the tallest mountain in the world, and how tall is it?",
    "What are the three states of matter?",
    "How many continents are there, and what are they called?",
    "What is inflation in economics?",
    "Why do we have day and night?",
    "What is the longest river in Africa?",
    "How do magnets work?",
    "What language is spoken in Brazil?",
    "What is an atom made of?",
    "Why do cats purr?",
    "What does a thermometer measure?",
    "What is the boiling point of water at sea level in Celsius and in Fahrenheit?",
    "How long does it take light from the sun to reach the Earth?",
    "What is the difference between a meteor and a meteorite?",
    "Who was the first person to walk on the Moon?",
    "What is the function of the lungs?",
    "What is a democracy?",
    "What is the speed of sound in air, approximately?",
    "What is the main ingredient in guacamole?",
    "How do fish breathe underwater?",
    "What is the difference between a herbivore and a carnivore?",
    "What is the Great Barrier Reef, and where is it?",
    "Why do we need to drink water?",
    "What are renewable energy sources? Give three examples.",
    "What is the difference between speed and velocity?",
    "How many bones are there in the adult human body?",
    "What did the Wright brothers invent?",
    "What is an earthquake, and what causes it?",
    "What is the smallest prime number?",
]


# =============================================================== rag
RAG_INSTRUCTIONS = [
    "Use the passage below to answer the question.\n\nPassage:\n{p}\n\nQuestion: {q}",
    "Read the following text and answer the question using only information from the text.\n\n{p}\n\nQuestion: {q}",
    "Context:\n{p}\n\nBased on the context above, {q_lower}",
    "Answer the question based on this information:\n\n{p}\n\nQuestion: {q}",
]

COMPANY_KINDS = [
    (
        "software",
        "a two-person project that made a calendar app for students",
        "the planning app TaskTide",
        "helps small teams share to-do lists and deadlines",
    ),
    (
        "furniture",
        "a small workshop that repaired old chairs",
        "the Fold desk",
        "folds flat against the wall when it is not in use",
    ),
    (
        "food",
        "a stall at a weekend farmers' market",
        "its oat-and-honey granola",
        "is now sold in more than 400 supermarkets",
    ),
    (
        "bicycle",
        "a repair shop in a garage",
        "the Commuter 3 e-bike",
        "can travel about 80 kilometers on a single charge",
    ),
    (
        "toy",
        "a hobby making wooden puzzles for the founder's children",
        "the Tinker Blocks building set",
        "lets children build moving machines without any tools",
    ),
    (
        "clothing",
        "an online shop selling hand-knitted hats",
        "a waterproof jacket made from recycled bottles",
        "has won two design awards",
    ),
]


def r_company(rng):
    industry, origin, product, desc = rng.choice(COMPANY_KINDS)
    name = rng.choice(
        ["Brightleaf", "Northpine", "Bluefern", "Copperlane", "Silverbirch", "Redwing", "Greystone", "Sunhollow"]
    )
    founder = _person(rng)
    year = rng.randint(1995, 2015)
    year2 = year + rng.randint(4, 8)
    city, city2 = rng.sample(TOWNS, 2)
    staff = rng.randrange(40, 600, 10)
    p = (
        f"{name} is a {industry} company founded in {year} by {founder} in {city}. "
        f"It started as {origin} and now employs about {staff} people. "
        f"Its best-known product is {product}, which {desc}. "
        f"In {year2}, the company opened a second office in {city2}. "
        f"{founder.split()[0]} still leads the company today and says its goal is to make useful products that last for many years."
    )
    q = rng.choice(
        [
            f"Who founded {name}, and in what year?",
            f"Where did {name} open its second office, and when?",
            f"What is {name}'s best-known product?",
            f"How did {name} start, and how many people does it employ now?",
        ]
    )
    return p, q


EVENT_KINDS = [
    # (name, activity, extra sentence, doors open, first activity)
    ("Book Fair", "author talk", "Children's books are sold at half price on the first day.", "9 a.m.", "10 a.m."),
    ("Jazz Night", "set", "Food and drinks are available from local vendors.", "6 p.m.", "7 p.m."),
    (
        "Science Festival",
        "demonstration",
        "Most activities are designed for children aged 6 to 14.",
        "10 a.m.",
        "10:30 a.m.",
    ),
    (
        "Winter Market",
        "craft workshop",
        "More than fifty local makers will sell gifts and decorations.",
        "11 a.m.",
        "noon",
    ),
    (
        "Film Festival",
        "screening",
        "Each screening is followed by a short talk with the director.",
        "5 p.m.",
        "5:30 p.m.",
    ),
    (
        "Garden Show",
        "gardening talk",
        "Visitors can buy seeds and young plants from local growers.",
        "9 a.m.",
        "9:30 a.m.",
    ),
]


def r_event(rng):
    kind, activity, extra, doors, first = rng.choice(EVENT_KINDS)
    town = rng.choice(TOWNS)
    venue = rng.choice(
        ["the Exhibition Hall", "the Old Market Building", "Central Park Pavilion", "the Town Arts Center"]
    )
    month, day = rng.choice(MONTHS), rng.randint(1, 28)
    adv = rng.choice([8, 10, 12, 15])
    door_price = adv + rng.choice([3, 5])
    p = (
        f"The {town} {kind} will take place on {month} {day} at {venue}. "
        f"Doors open at {doors}, and at {first} the first {activity} begins. "
        f"Tickets cost ${adv} if bought in advance or ${door_price} at the door, and children under 12 enter for free. "
        f"{extra} Parking near the venue is limited, so visitors are encouraged to arrive by bus or bicycle."
    )
    q = rng.choice(
        [
            f"When do the doors open, and when does the first {activity} begin?",
            "How much does a ticket cost at the door?",
            "How are visitors encouraged to travel to the event, and why?",
            f"Where and when will the {kind} take place?",
        ]
    )
    return p, q


def r_gym(rng):
    name = rng.choice(["FitHub", "Peak Fitness", "Motion Gym", "CoreWorks", "Iron Oak Fitness"])
    p1 = rng.choice([25, 29, 32, 35])
    p2 = p1 + rng.choice([15, 20, 25])
    notice = rng.choice([14, 30])
    guest = rng.choice([5, 8, 10])
    p = (
        f"Members of {name} can choose between two plans. The Basic plan costs ${p1} per month and includes access to the weight room and cardio machines from 6 a.m. to 10 p.m. "
        f"The Plus plan costs ${p2} per month and adds unlimited group classes, use of the swimming pool, and one free session with a personal trainer each month. "
        f"Members can bring a guest for ${guest} per visit. Memberships can be cancelled with {notice} days' notice by email or at the front desk. "
        f"New members pay no joining fee if they sign up before the end of the month."
    )
    q = rng.choice(
        [
            "What does the Plus plan include, and how much does it cost?",
            "How can a member cancel their membership?",
            "How much does it cost to bring a guest?",
            "What is the difference between the Basic plan and the Plus plan?",
        ]
    )
    return p, q


RESTAURANT_KINDS = [
    ("Italian", "the mushroom risotto", "homemade tiramisu"),
    ("Lebanese", "the grilled chicken with garlic sauce", "baklava"),
    ("Mexican", "the slow-cooked pork tacos", "churros with chocolate"),
    ("Japanese", "the vegetable ramen", "green tea ice cream"),
    ("Indian", "the chickpea curry", "mango kulfi"),
]


def r_restaurant(rng):
    cuisine, dish, dessert = rng.choice(RESTAURANT_KINDS)
    name = rng.choice(
        ["Casa Verde", "The Blue Door", "Little Lantern", "Olive & Thyme", "The Corner Table", "Saffron House"]
    )
    street = rng.choice(["Harbor Street", "Mill Lane", "King Street", "Elm Avenue", "Station Road"])
    days = rng.choice(["Tuesday to Sunday", "Wednesday to Monday", "Monday to Saturday"])
    close = rng.choice(["10 p.m.", "11 p.m."])
    group = rng.choice([6, 8])
    p = (
        f"{name} is a family-run {cuisine} restaurant on {street}. It is open from noon to {close}, {days}. "
        f"The most popular dish on the menu is {dish}, and many guests finish their meal with {dessert}. "
        f"Reservations are required for groups of more than {group} people and can be made by phone. "
        f"The restaurant offers vegetarian options on every page of the menu, and a children's menu is available until 7 p.m."
    )
    q = rng.choice(
        [
            f"On which days and at what times is {name} open?",
            "When do guests need to make a reservation, and how can they make one?",
            "What is the most popular dish at the restaurant?",
        ]
    )
    return p, q


def r_hotel(rng):
    name = rng.choice(["Harborview Hotel", "Alder Inn", "Grand Meadow Hotel", "Seaside Lodge", "Larch House Hotel"])
    checkin = rng.choice(["2 p.m.", "3 p.m."])
    checkout = rng.choice(["10 a.m.", "11 a.m."])
    late = rng.choice([20, 25, 30])
    parking = rng.choice([12, 15, 18])
    p = (
        f"Check-in at the {name} begins at {checkin}, and guests must check out by {checkout} on the day they leave. "
        f"Guests who need a late check-out can request one at reception for a fee of ${late}, depending on availability. "
        f"Breakfast is served from 7 to 10 a.m. in the garden restaurant and is included for guests who booked directly with the hotel. "
        f"Parking is available in the underground garage for ${parking} per night. "
        f"Free Wi-Fi is available in all rooms, and the fitness room on the top floor is open 24 hours a day."
    )
    q = rng.choice(
        [
            "Is breakfast included, and when is it served?",
            "What should a guest do if they need to leave later than the normal check-out time?",
            "How much does parking cost, and where is it?",
            "What are the check-in and check-out times?",
        ]
    )
    return p, q


CITY_PROGRAMS = [
    (
        "plant 5,000 new street trees",
        "planted 3,200 trees, mostly in neighborhoods with little shade",
        "finish the remaining trees by next spring",
    ),
    (
        "reduce waiting times at the city's health clinics",
        "cut the average wait for an appointment from 12 days to 5 days",
        "open two more clinics in the eastern districts",
    ),
    (
        "fix broken streetlights more quickly",
        "repaired more than 900 lights, usually within 48 hours of a report",
        "replace all old bulbs with LED lights",
    ),
    (
        "teach basic computer skills to older residents",
        "held free classes for over 600 people aged 60 and above",
        "add classes on online banking and video calls",
    ),
    (
        "make school lunches healthier",
        "added fresh fruit and vegetables to every lunch and reduced sugary drinks",
        "work with local farms to supply more of the food",
    ),
]


def r_program(rng):
    goal, result, nxt = rng.choice(CITY_PROGRAMS)
    town = rng.choice(TOWNS)
    year = rng.randint(2015, 2022)
    cost = rng.choice(["$1.2 million", "$850,000", "$2.4 million", "$600,000"])
    funder = rng.choice(["a national government grant", "the city's own budget", "a partnership with local businesses"])
    p = (
        f"In {year}, the city of {town} launched a program to {goal}. "
        f"During its first year, the program {result}. "
        f"The program cost {cost} and was paid for by {funder}. "
        f"City officials said they were pleased with the results and plan to {nxt}. "
        f"Residents can share their feedback on the program through the city's website."
    )
    q = rng.choice(
        [
            "What did the program achieve in its first year?",
            "How much did the program cost, and who paid for it?",
            "What do city officials plan to do next?",
            "When was the program launched, and what was its goal?",
        ]
    )
    return p, q


def r_fair(rng):
    town = rng.choice(TOWNS)
    school = f"{town} Middle School"
    g1, g2 = rng.choice([(5, 8), (6, 8), (6, 9)])
    month, day = rng.choice(["February", "March", "April"]), rng.randint(1, 28)
    size = rng.choice([2, 3])
    prize = rng.choice(
        [
            "a new microscope for the winning team's classroom",
            "a trip to the national science museum",
            "a $200 gift card for science supplies",
        ]
    )
    p = (
        f"Students in grades {g1} to {g2} may enter the {school} Science Fair. "
        f"Projects must be registered with a science teacher by {month} {day}. Students can work alone or in teams of up to {size}. "
        f"Each project is judged on three things: the question being tested, the quality of the experiment, and how clearly the results are explained on the poster. "
        f"First prize is {prize}. Projects that use open flames or dangerous chemicals are not allowed."
    )
    q = rng.choice(
        [
            "How are the projects judged?",
            "Who can enter the science fair, and how many students can be on a team?",
            "What is the first prize, and which projects are not allowed?",
            "By what date must projects be registered?",
        ]
    )
    return p, q


RAG_TEMPLATES = [r_company, r_event, r_gym, r_restaurant, r_hotel, r_program, r_fair]


def make_rag(rng):
    prompts, seen = [], set()
    i = 0
    while len(prompts) < COUNTS["rag"]:
        p, q = RAG_TEMPLATES[i % len(RAG_TEMPLATES)](rng)
        instr = RAG_INSTRUCTIONS[len(prompts) % len(RAG_INSTRUCTIONS)]
        i += 1
        if (p, q) in seen or p in {s for s, _ in seen}:
            continue
        seen.add((p, q))
        prompts.append(instr.format(p=p, q=q, q_lower=q[0].lower() + q[1:]))
    return prompts


# =============================================================== writing
WRITING = [
    "Write a short poem about a rainy morning in the city.",
    "Write a short poem about the first snow of winter.",
    "Write a short poem about a train journey at night.",
    "Write a short poem about a grandmother's kitchen.",
    "Write a haiku about a spider web covered in morning dew.",
    "Write a haiku about a quiet library.",
    "Write a haiku about a thunderstorm.",
    "Write a short story of about 100 words about a girl who finds a map hidden inside an old book.",
    "Write a short story of about 100 words about a mail carrier who delivers a letter fifty years late.",
    "Write a short story of about 100 words about a dog that gets lost at the beach and finds its way home.",
    "Write a short story of about 100 words about two strangers who share an umbrella.",
    "Write a short story of about 100 words about a child who plants a seed that grows overnight into a giant tree.",
    "Write a product description for a folding camping chair.",
    "Write a product description for a pair of noise-cancelling headphones.",
    "Write a product description for a scented candle that smells like fresh pine.",
    "Write a product description for a children's picture book about space.",
    "Write a short email to your landlord reporting a leaking kitchen faucet.",
    "Write a short email to a teacher asking for more time to finish a school project.",
    "Write a short email inviting your coworkers to a farewell lunch for a colleague.",
    "Write a short email to a hotel asking whether they have a room available next weekend.",
    "Write a catchy slogan for a small bakery that sells fresh bread every morning.",
    "Write a catchy slogan for a bicycle repair shop.",
    "Write a catchy slogan for a tutoring service that helps students with math.",
    "Write a short birthday message for a friend who is turning thirty.",
    "Write a short congratulations message for a coworker who just got promoted.",
    "Write a short get-well-soon message for a classmate who broke their leg.",
    "Write a short introduction about yourself for the first day of a new job.",
    "Write a short advertisement for a garage sale happening this Saturday.",
    "Write a short description of a sunset at the beach, using vivid details.",
    "Write a diary entry from the point of view of an astronaut on her first day in space.",
    "Write a short dialogue between a customer and a shopkeeper in a flower shop.",
    "Write a motivational message for someone who is training for their first marathon.",
    "Write a short review of an imaginary fantasy movie about dragons.",
    "Write a short fable about a proud tortoise and a clever crow, with a moral at the end.",
    "Write four rules for a friendly office kitchen, in a humorous tone.",
    "Write the opening sentence of a mystery novel set in a snowy mountain village.",
    "Write a short letter to your future self, to be opened in ten years.",
]


# =============================================================== chat
CHAT = [
    "Hi! How are you doing today?",
    "What's a good way to start learning the guitar?",
    "I'm nervous about a job interview tomorrow. Do you have any tips?",
    "Can you recommend some fun things to do on a rainy weekend at home?",
    "How can I make small talk with people I don't know at a party?",
    "I want to drink more water during the day. How can I remember to do it?",
    "What are some easy houseplants for beginners?",
    "My friend is upset with me and I don't know why. What should I do?",
    "How do I stay focused when working from home?",
    "What's the best way to save money on groceries?",
    "Can you explain what a budget is and how to make a simple one?",
    "I just moved to a new city. How can I make new friends?",
    "Tell me a fun fact about space.",
    "What should I pack for a three-day hiking trip?",
    "How do I politely say no when someone asks me for a favor?",
    "I keep putting things off until the last minute. How can I stop procrastinating?",
    "What are some good habits to start in the morning?",
    "What are some good snacks to bring to a picnic?",
    "How can I get better at public speaking?",
    "What's the difference between a hobby and a passion?",
    "Do you have any tips for learning a new language?",
    "I feel bored with my daily routine. Any ideas to make it more interesting?",
    "How do I take care of a new puppy?",
    "What are some good questions to ask on a first date?",
    "Can you explain how compound interest works in simple words?",
    "What is a good way to remember people's names?",
    "How can I be more patient with my younger brother?",
    "Tell me a short, clean joke.",
    "What are some ways to relax after a stressful day?",
    "How do I choose a good book to read?",
    "I want to start running. How should I begin?",
    "What are some tips for writing a good resume?",
    "Why do people enjoy scary movies?",
    "How can I keep my desk organized?",
    "What's a nice gift for a friend who loves cooking?",
    "How do I start a conversation with a coworker I don't know well?",
    "Can you explain what a password manager is and why it's useful?",
    "What should I do if I can't decide between two job offers?",
]


def build():
    rng = random.Random(SEED)
    sets = {
        "coding": make_coding(rng),
        "math": make_math(rng),
        "summarization": make_summarization(rng),
        "translation": make_translation(rng),
        "qa": list(QA),
        "rag": make_rag(rng),
        "writing": list(WRITING),
        "chat": list(CHAT),
    }
    for cat, prompts in sets.items():
        assert len(prompts) == COUNTS[cat], (cat, len(prompts), COUNTS[cat])
    rows = []
    for cat, prompts in sets.items():
        for text in prompts:
            rows.append({"question_id": len(rows) + 1, "category": cat, "turns": [text]})
    return rows


def main():
    from specdec_lab.io import write_jsonl  # atomic, like every data file; the prompts themselves need no torch

    rows = build()
    write_jsonl(OUT_PATH, rows)
    print(f"wrote {len(rows)} prompts to {OUT_PATH}")


if __name__ == "__main__":
    main()
